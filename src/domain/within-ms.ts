/** `work`, or what `timedOut` makes (thrown when an error, resolved otherwise) after `ms`. */
export const withinMs = async <T>(work: Promise<T>, ms: number, timedOut: () => unknown): Promise<T | undefined> => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve, reject) => {
    timer = setTimeout(() => {
      const outcome = timedOut();
      if (outcome instanceof Error) reject(outcome);
      else resolve(undefined);
    }, ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
};

/** Whether every one of `work` settled (whatever its outcome) within `ms`; true at once when there is none. */
export const allSettledWithin = async (work: Promise<unknown>[], ms: number): Promise<boolean> => {
  if (work.length === 0) return true;
  const settled = Promise.allSettled(work).then(() => true as const);
  return (await withinMs(settled, ms, () => undefined)) === true;
};
