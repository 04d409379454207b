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
