// The project's own convention (docs/executor.md "File naming"): `<version>_<name>.up.sql`, the whole file is the
// migration, and `-- ptah:no-transaction` as its first line runs it one statement at a time.
import type { FormatReader } from './reader.js';

const UP_FILE = /^(?<version>[0-9]{1,30})_(?<name>[A-Za-z0-9][A-Za-z0-9_-]{0,199})\.up\.sql$/;
/** Down files are allowed beside the up files (other tools use them) and ignored. */
const DOWN_FILE = /^[0-9]{1,30}_[A-Za-z0-9][A-Za-z0-9_-]{0,199}\.down\.sql$/;
export const NO_TRANSACTION_DIRECTIVE = '-- ptah:no-transaction';

export const ptahReader: FormatReader = {
  format: 'ptah',
  fileShape: '<version>_<name>.up.sql',
  namingRule: 'Name each migration <version>_<name>.up.sql (version: 1 to 30 digits, unique by numeric value: 001 and 1 ' +
    'are the same version; name: a letter or digit, then letters, digits, _ and -, up to 200 characters); ' +
    '<version>_<name>.down.sql files and hidden entries are ignored; rename or remove anything else, or declare the ' +
    'spec.artifact.format the directory is written in (golang-migrate, goose, dbmate, flyway)',
  entry(fileName) {
    const match = UP_FILE.exec(fileName);
    if (match) return { kind: 'migration', version: match.groups!.version!, name: match.groups!.name! };
    return DOWN_FILE.test(fileName) ? { kind: 'ignored' } : { kind: 'misnamed' };
  },
  upSection(_fileName, text) {
    return {
      sql: text,
      transactional: (text.split('\n', 1)[0] ?? '').trimEnd() !== NO_TRANSACTION_DIRECTIVE,
      transactionAdvice: `make \`${NO_TRANSACTION_DIRECTIVE}\` its first line (its statements then run one at a time, each committed on ` +
        'its own), or move the statement to a file of its own that starts with it',
    };
  },
  foreignTools: ['goose', 'dbmate'],
  ordersByFileName: false,
};
