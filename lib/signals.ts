/**
 * How a program waits for its end: the first SIGINT or SIGTERM resolves (the program then closes cleanly); a
 * second one while it closes exits at once (130), for an operator who does not want to wait.
 */
export function waitForSignal(): Promise<string> {
  return new Promise((resolveSignal) => {
    const handler = (signal: NodeJS.Signals) => {
      process.off("SIGINT", handler);
      process.off("SIGTERM", handler);
      // A second signal while closing exits at once.
      const force = () => process.exit(130);
      process.once("SIGINT", force);
      process.once("SIGTERM", force);
      resolveSignal(signal);
    };
    process.on("SIGINT", handler);
    process.on("SIGTERM", handler);
  });
}
