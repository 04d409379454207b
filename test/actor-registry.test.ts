import t from 'tap';
import { ActorRegistry } from '../src/runtime/actor-registry.js';
import { liveActorsIn } from '../src/runtime/instance-actor.js';
import type { RemoteVersion } from '../src/sandbox/index.js';

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

t.test('a cap on the actors live in a sandbox evicts its least recently used idle ones, and holds until lifted', async (t) => {
  const registry = new ActorRegistry(100, 1_000_000);
  const stopped: string[] = [];
  const sandboxOf = (versionId: string) =>
    ({ versionId, healthy: true, stop: (key: string) => void stopped.push(key) }) as unknown as RemoteVersion;
  const hot = sandboxOf('ver_hot');
  const other = sandboxOf('ver_other');
  for (const name of ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']) registry.obtain('org_1', 'm', name).sandbox = hot;
  registry.obtain('org_1', 'n', 'x').sandbox = other;
  registry.obtain('org_1', 'm', 'cold');
  t.equal(liveActorsIn(hot), 8, 'the actors count where they are live');
  let release: (() => void) | undefined;
  const running = registry.peek('org_1', 'm', 'a')!.enqueue(() => new Promise<void>((resolve) => (release = resolve)));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(registry.capLiveIn(hot, 6), 2);
  t.same(
    names(registry),
    ['a', 'd', 'e', 'f', 'g', 'h', 'x', 'cold'],
    "b and c went, the oldest idle ones; the busy a, the other version's x and the actor live nowhere stayed",
  );
  t.same(stopped, ['org_1/m/b', 'org_1/m/c'], 'their live interpreters were stopped in the sandbox');
  t.equal(liveActorsIn(hot), 6);

  // One more actor live there, committed (resize): the cap evicts the oldest idle one again.
  const i = registry.obtain('org_1', 'm', 'i');
  i.sandbox = hot;
  registry.resize(i, 100);
  t.same(names(registry), ['a', 'e', 'f', 'g', 'h', 'x', 'cold', 'i'], 'd went for i');
  t.equal(registry.liveCapOf(hot), 6);

  registry.capLiveIn(hot, undefined);
  const j = registry.obtain('org_1', 'm', 'j');
  j.sandbox = hot;
  registry.resize(j, 100);
  t.equal(liveActorsIn(hot), 7, 'lifted: nothing more goes');
  t.equal(registry.capLiveIn(hot, 0), 6, 'a cap of 0: all but the busy one');
  t.same(names(registry), ['a', 'x', 'cold']);
  release?.();
  await running;
});
