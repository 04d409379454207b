// test/client-compat-smply-bundle.test.ts on a node whose machine code runs in its own process (helpers/on-inline.ts).
import { runInline } from '../helpers/on-inline.js';

await runInline('client-compat-smply-bundle');
