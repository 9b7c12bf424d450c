/** Helpers of the upgrade tests. */
import { expect } from "chai";

/** Awaits `promise`, expecting it to reject with an instance of `type` whose message matches `pattern`; returns the error. */
export async function rejection<E extends Error>(promise: Promise<unknown>, type: new (...args: never[]) => E, pattern: RegExp): Promise<E> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(type);
    expect((error as Error).message).to.match(pattern);
    return error as E;
  }
  throw new Error(`expected a rejection matching ${pattern}, but it resolved`);
}
