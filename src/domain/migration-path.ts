/**
 * Which migrations take an instance from one machine version to another (wire-protocol §8.5): any
 * chain of migrations, each from its `from` version to its `to` version (its functions map the one's
 * states to the other's; they cannot run the other way). The chain may go to a newer version or back
 * to an older one, through any versions, as long as a migration exists for every hop. The fewest hops
 * win (breadth-first); among chains of equal length, the one whose migrations were made last (a
 * migration uploaded again for the same hop, to fix the first, replaces it), then the first found in
 * `migrations` order, so the same edges always give the same chain.
 */

export interface MigrationEdge {
  id: string;
  fromVersionId: string;
  toVersionId: string;
  /** When it was made (ISO 8601): of two for the same hop, the later is taken. */
  createdAt?: string;
}

/** One hop of a chain: the migration and the versions it goes between. */
interface MigrationStep {
  migrationId: string;
  fromVersionId: string;
  toVersionId: string;
}

/**
 * The shortest chain from `from` to `to`; [] when they are the same version; undefined when no chain
 * connects them.
 */
export const migrationPath = (migrations: readonly MigrationEdge[], from: string, to: string): MigrationStep[] | undefined => {
  if (from === to) return [];
  const neighbours = new Map<string, MigrationStep[]>();
  const add = (step: MigrationStep): void => {
    const list = neighbours.get(step.fromVersionId);
    if (list) list.push(step);
    else neighbours.set(step.fromVersionId, [step]);
  };
  // Newest first (a stable sort: equal times keep their order), so each version's first way on is its newest.
  const newestFirst = [...migrations].sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? ''));
  for (const migration of newestFirst) {
    add({ migrationId: migration.id, fromVersionId: migration.fromVersionId, toVersionId: migration.toVersionId });
  }
  // How each version was first reached: walking these back from `to` gives the chain.
  const reachedBy = new Map<string, MigrationStep | null>([[from, null]]);
  let frontier = [from];
  while (frontier.length > 0) {
    const next: string[] = [];
    for (const version of frontier) {
      for (const step of neighbours.get(version) ?? []) {
        if (reachedBy.has(step.toVersionId)) continue;
        reachedBy.set(step.toVersionId, step);
        if (step.toVersionId === to) return chainTo(reachedBy, to);
        next.push(step.toVersionId);
      }
    }
    frontier = next;
  }
  return undefined;
};

const chainTo = (reachedBy: Map<string, MigrationStep | null>, to: string): MigrationStep[] => {
  const chain: MigrationStep[] = [];
  for (let step = reachedBy.get(to); step; step = reachedBy.get(step.fromVersionId)) chain.push(step);
  return chain.reverse();
};
