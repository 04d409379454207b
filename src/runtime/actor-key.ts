/** The key of an instance's actor inside its version's isolate, and in the runtime's registry. */
export const actorKey = (orgId: string, machine: string, name: string): string => `${orgId}/${machine}/${name}`;

export const parseActorKey = (key: string): { orgId: string; machine: string; name: string } | undefined => {
  const [orgId, machine, name] = key.split('/');
  return orgId && machine && name ? { orgId, machine, name } : undefined;
};
