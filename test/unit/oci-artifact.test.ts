// The OCI artifact's pure parts: references by the distribution grammar (sha256 only, the registry always named),
// the layout's determinism and its refusals, and Docker config credentials matched by host and port alone.
import t from 'tap';
import { ArtifactLayoutError, ARTIFACT_TYPES, filesProblem, packArtifact, TITLE_ANNOTATION } from '../../src/shared/oci/artifact-layout.js';
import { credentialsFor, DockerConfigError } from '../../src/shared/oci/docker-config.js';
import { formatReference, parseReference, ReferenceError } from '../../src/shared/oci/reference.js';

const HEX = 'a'.repeat(64);
const bytes = (text: string) => new TextEncoder().encode(text);

t.test('references', async (t) => {
  t.same(parseReference('registry.example/team/app:v1'), { registry: 'registry.example', repository: 'team/app', tag: 'v1' });
  t.same(parseReference(`127.0.0.1:5000/app@sha256:${HEX}`), { registry: '127.0.0.1:5000', repository: 'app', digest: `sha256:${HEX}` });
  t.same(parseReference(`localhost/a.b/c__d/e-f:1.0_x@sha256:${HEX}`), { registry: 'localhost', repository: 'a.b/c__d/e-f', tag: '1.0_x', digest: `sha256:${HEX}` });
  t.same(parseReference('[::1]:5000/app:v1').registry, '[::1]:5000');
  for (const text of ['registry.example/team/app:v1', `127.0.0.1:5000/app@sha256:${HEX}`, `localhost/a:b@sha256:${HEX}`]) {
    t.equal(formatReference(parseReference(text)), text, `${text} round-trips`);
  }
  const refusals: [string, RegExp][] = [
    ['team/app:v1', /"team" is not a registry host/],
    ['app:v1', /names no registry/],
    ['registry.example/team/app', /neither a tag nor a digest/],
    ['registry.example/Team/app:v1', /the repository "Team\/app" is not lowercase/],
    ['registry.example/team//app:v1', /the repository "team\/\/app"/],
    ['registry.example/team/app:-v1', /the tag "-v1"/],
    [`registry.example/team/app:${'x'.repeat(129)}`, /the tag/],
    [`registry.example/app@sha512:${'a'.repeat(128)}`, /not sha256:<64 lowercase hex>/],
    [`registry.example/app@sha256:${'A'.repeat(64)}`, /not sha256/],
    [`registry.example/app@sha256:${HEX.slice(1)}`, /not sha256/],
    ['https://registry.example/app:v1', /is not a registry host/],
    [`registry.example/${'a/'.repeat(300)}app:v1`, /longer than 512 characters/],
  ];
  for (const [text, reason] of refusals) t.throws(() => parseReference(text), { name: ReferenceError.name, message: reason }, text.slice(0, 60));
});

t.test('the layout', async (t) => {
  const files = new Map([['2_b.up.sql', bytes('B')], ['10_c.up.sql', bytes('C')], ['1_a.up.sql', bytes('A')]]);
  const packed = packArtifact('migrations', files, { z: '1', a: '2' });
  const reordered = packArtifact('migrations', new Map([...files].reverse()), { a: '2', z: '1' });
  t.equal(reordered.digest, packed.digest, 'the order files and annotations are given in changes nothing');
  t.same(Buffer.from(reordered.manifest), Buffer.from(packed.manifest), 'byte for byte');
  const manifest = JSON.parse(Buffer.from(packed.manifest).toString('utf8')) as { artifactType: string; layers: { annotations: Record<string, string> }[]; annotations: Record<string, string> };
  t.equal(manifest.artifactType, ARTIFACT_TYPES.migrations);
  t.same(manifest.layers.map((l) => l.annotations[TITLE_ANNOTATION]), ['10_c.up.sql', '1_a.up.sql', '2_b.up.sql'], 'layers in code-unit order of names');
  t.same(Object.keys(manifest.annotations), ['a', 'z']);
  t.equal(packed.blobs.size, 3);
  const shared = packArtifact('migrations', new Map([['1_a.up.sql', bytes('same')], ['2_b.up.sql', bytes('same')]]));
  t.equal(shared.blobs.size, 1, 'files of equal content share one blob');
  t.notOk('annotations' in JSON.parse(Buffer.from(shared.manifest).toString('utf8')), 'no annotations given, none written');
  t.not(packArtifact('migrations', files, { a: '3', z: '1' }).digest, packed.digest, 'another annotation value is another digest');

  t.equal(filesProblem('schema', new Map([['schema.sql', bytes('x')]])), undefined, 'a schema.sql alone is a schema');
  t.match(filesProblem('schema', new Map([['other.sql', bytes('x')]])), /exactly one file, schema\.sql \(found: other\.sql\)/);
  t.match(filesProblem('migrations', new Map()), /holds no file/);
  t.match(filesProblem('migrations', new Map([['a/b.sql', bytes('x')], ['..', bytes('y')]])), /"a\/b\.sql" is not a file name.*"\.\." is not a file name/, 'every bad name, at once');
  t.throws(() => packArtifact('schema', new Map([['x.sql', bytes('')]])), { name: ArtifactLayoutError.name, message: /cannot be a schema artifact/ });
});

t.test('Docker config credentials', async (t) => {
  const auth = Buffer.from('user:pa:ss').toString('base64');
  const config = JSON.stringify({ auths: { 'https://reg.example:5000/v2/': { auth }, 'other.example': { username: 'u', password: 'p' } } });
  t.same(credentialsFor(config, 'reg.example:5000', 'cfg'), { username: 'user', password: 'pa:ss' }, 'a scheme and a path in the key are ignored; the password keeps its colons');
  t.same(credentialsFor(config, 'OTHER.example', 'cfg'), { username: 'u', password: 'p' }, 'hosts compare case-insensitively');
  t.equal(credentialsFor(config, 'reg.example', 'cfg'), undefined, 'another port is another registry');
  t.equal(credentialsFor(config, 'sub.other.example', 'cfg'), undefined, 'no glob, no suffix match');
  t.equal(credentialsFor('{}', 'reg.example', 'cfg'), undefined, 'no auths, no credentials');
  const refusals: [string, RegExp][] = [
    ['{', /cfg is not JSON/],
    ['{"auths": []}', /"auths" is not an object/],
    ['{"auths": {"reg.example": "x"}}', /the entry for reg\.example is not an object/],
    [`{"auths": {"reg.example": {"auth": "${Buffer.from('nocolon').toString('base64')}"}}}`, /"auth" of reg\.example is not base64 of <username>:<password>/],
    ['{"auths": {"reg.example": {"identitytoken": "t"}}}', /identity tokens and credential helpers are not read/],
  ];
  for (const [text, reason] of refusals) t.throws(() => credentialsFor(text, 'reg.example', 'cfg'), { name: DockerConfigError.name, message: reason }, text);
  const secret = Buffer.from('nocolon').toString('base64');
  const refused = t.throws(() => credentialsFor(`{"auths": {"reg.example": {"auth": "${secret}"}}}`, 'reg.example', 'cfg')) as Error;
  t.notOk(refused.message.includes(secret) || refused.message.includes('nocolon'), 'the refusal does not echo the credential');
});
