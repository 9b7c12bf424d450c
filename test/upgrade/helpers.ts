/** Helpers of the upgrade tests. */
import { expect } from "chai";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

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

/** A minimal built dist/: what buildRelease requires, plus a build stamp it must leave out. */
export function fakeDist(root: string, version: string): string {
  const dist = join(root, `dist-${version}`);
  mkdirSync(join(dist, "node"), { recursive: true });
  writeFileSync(join(dist, "node", "cli.js"), `exports.main = () => console.log("${version}");\n`);
  writeFileSync(join(dist, "package.json"), JSON.stringify({ name: "attested-time", version }));
  writeFileSync(join(dist, ".build-stamp"), `${new Date().toISOString()}\n`);
  return dist;
}
