/**
 * A poll loop that never overlaps itself: the next read starts `intervalMs` after the previous one ended, so a
 * slow endpoint slows the loop instead of piling requests on it. Errors go to `onError` (shown on the page, not
 * thrown); `stop()` ends the loop.
 */
export function every(intervalMs: number, read: () => Promise<void>, onError: (error: unknown) => void): { stop(): void } {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    try {
      await read();
    } catch (error) {
      onError(error);
    }
    if (!stopped) timer = setTimeout(() => void tick(), intervalMs);
  };
  void tick();
  return {
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}

/** One line for an error shown on the page. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
