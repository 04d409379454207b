import t from 'tap';
import { ActorRegistry } from '../src/runtime/actor-registry.js';

const names = (registry: ActorRegistry): string[] => [...registry.all()].map((actor) => actor.name);

t.test('one actor per instance; the count bound evicts the least recently inserted idle actors', async (t) => {
  const registry = new ActorRegistry(4, 1_000_000);
  const a = registry.obtain('org_1', 'm', 'a');
  t.equal(registry.obtain('org_1', 'm', 'a'), a, 'the same actor for the same instance');
  t.not(registry.obtain('org_2', 'm', 'a'), a, 'another org: another actor');
  for (const name of ['b', 'c', 'd']) registry.obtain('org_1', 'm', name);
  t.equal(registry.size, 5, 'the bound is applied when an actor is resized');
  registry.resize(registry.peek('org_1', 'm', 'd')!, 10);
  t.same(names(registry), ['a', 'b', 'c', 'd'], 'org_1/a went: the oldest');
  t.equal(registry.peek('org_1', 'm', 'a'), undefined);
});

t.test('an actor in the older half is moved to the newest end when taken; one in the newer half is not', async (t) => {
  const registry = new ActorRegistry(4, 1_000_000);
  for (const name of ['a', 'b', 'c', 'd']) registry.obtain('org_1', 'm', name);
  registry.obtain('org_1', 'm', 'c');
  t.same(names(registry), ['a', 'b', 'c', 'd'], 'c (2 insertions ago, of 4) stays where it is');
  registry.obtain('org_1', 'm', 'a');
  t.same(names(registry), ['b', 'c', 'd', 'a'], 'a (4 insertions ago) moves');
  registry.resize(registry.obtain('org_1', 'm', 'e'), 10);
  t.same(names(registry), ['c', 'd', 'a', 'e'], 'so b is evicted, not a');
});

t.test('a busy actor is never evicted', async (t) => {
  const registry = new ActorRegistry(1, 1_000_000);
  const a = registry.obtain('org_1', 'm', 'a');
  let release: (() => void) | undefined;
  const running = a.enqueue(() => new Promise<void>((resolve) => (release = resolve)));
  registry.resize(registry.obtain('org_1', 'm', 'b'), 10);
  t.same(names(registry), ['a'], 'over the bound the idle b went; a, with a task in its mailbox, stayed');
  t.equal(registry.evictUnusedSince(Date.now() + 1), 0, 'nor does the idle sweep take a');
  await new Promise((resolve) => setImmediate(resolve));
  release?.();
  await running;
  t.equal(registry.evictUnusedSince(Date.now() + 1), 1, 'idle again, it goes');
  t.equal(registry.size, 0);
});

t.test('the idle sweep evicts every idle actor unused since the time, wherever it is in the order', async (t) => {
  const registry = new ActorRegistry(100, 1_000_000);
  for (const name of ['a', 'b', 'c', 'd']) registry.obtain('org_1', 'm', name);
  const now = Date.now();
  for (const actor of registry.all()) actor.lastUsedAt = now - 60_000;
  // b was taken just now, but stayed in place (the newer half): c and d behind it are still unused.
  registry.peek('org_1', 'm', 'b')!.lastUsedAt = now;
  t.equal(registry.evictUnusedSince(now - 1_000), 3);
  t.same(names(registry), ['b']);
});
