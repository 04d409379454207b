/** What the host hands globals.js as JSON (isolate-sources.ts isolateSettings). */
export interface IsolateSettings {
  maxTimersPerOwner: number;
  maxEventTimersPerOwner: number;
  maxLogEntryChars: number;
  maxLogEntriesPerCall: number;
  maxLogCharsPerCall: number;
  tamperedMarker: string;
}
