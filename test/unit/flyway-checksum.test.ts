// Flyway's checksum of a script (migration-formats.md §4): the reference's vectors, taken from Flyway's own
// ChecksumCalculator, and the line-ending, BOM and blank-line rules it states.
import t from 'tap';
import { flywayChecksum } from '../../src/executor/migrations/formats/flyway.js';

const SELECT_1 = 78787420;

t.test("the reference's vectors", async (t) => {
  t.equal(flywayChecksum('SELECT 1;'), SELECT_1);
  t.equal(flywayChecksum('SELECT 1;   '), -582681640, 'trailing spaces count, and the value is a signed int32');
  t.equal(flywayChecksum(''), 0, 'an empty file');
});

t.test('line terminators and a leading BOM are not part of the text', async (t) => {
  const script = ['CREATE TABLE t (id int);', 'INSERT INTO t VALUES (1);'];
  const lf = flywayChecksum(script.join('\n') + '\n');
  t.equal(flywayChecksum(script.join('\r\n') + '\r\n'), lf, 'CRLF');
  t.equal(flywayChecksum(script.join('\r')), lf, 'lone CR, no final newline');
  t.equal(flywayChecksum(script.join('\n')), lf, 'no final newline');
  t.equal(flywayChecksum('\uFEFF' + script.join('\n')), lf, 'a BOM');
  t.equal(flywayChecksum('SELECT 1;\n'), SELECT_1);
  t.equal(flywayChecksum('\uFEFFSELECT 1;\r\n'), SELECT_1);
  t.equal(flywayChecksum(script.join('\n\n\r\n\n')), lf, 'blank lines add nothing');
  t.equal(flywayChecksum('SELECT\n1;'), flywayChecksum('SELECT1;'), 'lines are joined with nothing between them');
});

t.test('what is not a terminator or a leading BOM counts', async (t) => {
  t.not(flywayChecksum('SELECT 1;\u2028'), SELECT_1, 'U+2028 is not a line break');
  t.not(flywayChecksum('SELECT 1;\f'), SELECT_1, 'a form feed is not a line break');
  t.not(flywayChecksum('SELECT 1;\uFEFF'), SELECT_1, 'a BOM elsewhere is text');
  t.not(flywayChecksum('\uFEFF\uFEFFSELECT 1;'), SELECT_1, 'only one leading BOM is dropped');
  t.not(flywayChecksum('select 1;'), SELECT_1, 'case counts');
});

t.test('non-ASCII text is checksummed as UTF-8', async (t) => {
  // The UTF-8 bytes of "é" are C3 A9; their CRC comes from a bitwise CRC-32, not from zlib.
  t.equal(flywayChecksum('é'), crc32Bitwise([0xc3, 0xa9]) | 0);
});

/** CRC-32/IEEE, bit by bit: an independent witness of the one zlib computes. */
function crc32Bitwise(bytes: readonly number[]): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}
