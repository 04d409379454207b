/** The API's shapes the console reads (wire-protocol §3, §5). */
export interface VersionInfo {
  id: string;
  createdAt: string;
  clientInfo: string;
}

export interface MachineListing {
  slug: string;
  createdAt: string;
  currentVersion?: VersionInfo;
}

export interface MachineRecord {
  createdAt: string;
  currentVersion?: VersionInfo;
  indexes: string[];
}

export interface InstanceListing {
  slug: string;
  createdAt: string;
  status: 'running' | 'paused';
  machineVersion: VersionInfo;
}

export interface AdminState {
  state: unknown;
  context: Record<string, unknown>;
  status: 'running' | 'paused';
  tags: string[];
  done: boolean;
  machineVersion: VersionInfo;
  desiredMachineVersion?: VersionInfo;
  createdAt: string;
}

export interface Transition {
  createdAt: string;
  state: unknown;
  event: unknown;
}

export interface LogEntry {
  timestamp: string;
  orgId: string;
  machineName: string;
  instanceName: string;
  machineVersionId: string;
  outputType: 'stdout' | 'stderr';
  log: string;
}

export interface KeyListing {
  id: string;
  name: string;
  scopes: string[];
  createdAt: string;
}

export interface OrgListing {
  id: string;
  name: string;
  role: string;
  createdAt: string;
}
