// test/machine-fetch.test.ts on a node whose machine code runs in its own process (helpers/on-inline.ts).
import { runInline } from '../helpers/on-inline.js';

await runInline('machine-fetch');
