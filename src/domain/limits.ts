/** Limits the service enforces (wire-protocol §8.7 and our own choices where sources are silent). */
export const limits = {
  /** Indexes a machine may declare. */
  maxIndexesPerMachine: 32,
  /** Default items per page of list endpoints. */
  defaultPageSize: 100,
  /** Largest `limit` of an index query (its default is the page size of list endpoints). */
  maxIndexQueryLimit: 1000,
  /** Default request body limit; migration creation bodies carry the code as JSON (≈ 10 bytes a byte). */
  defaultMaxBodyBytes: 12 * 1024 * 1024,
  /**
   * Largest body of a request that hands machine code an event or an instance's initial context (413
   * above it). The isolate parses an event twice (allowWrite, the machine) and a v4 snapshot keeps it
   * (persisted state is limited to 2 MiB). A MiB of small JSON objects takes the isolate 0.1–0.5 s of
   * CPU here, most of it garbage collection; 8 MiB took 2.4 s and then failed as state too large.
   */
  maxEventBodyBytes: 1024 * 1024,
  /** Largest body an http API request may carry (413 above it): it is parsed and copied into the sandbox. */
  maxHttpApiBodyBytes: 1024 * 1024,
  /** Identity providers one org may trust (an exchange tries each that matches its token). */
  maxIdentityProvidersPerOrg: 100,
  maxTokenProvidersPerOrg: 100,
  /**
   * Longest message of a machine code failure kept, in characters: machine code chooses it (what it
   * throws), and it goes into answers and into the instance's logs, where each retry of a delayed
   * event repeats it (4 MB thrown once was stored again at every retry).
   */
  maxMachineErrorChars: 8 * 1024,
} as const;
