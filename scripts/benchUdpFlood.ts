/**
 * The flooder of `bench:attack` attack 8, a child process of scripts/bench-attack.ts, which forks its build in
 * dist/scripts/ before the attack starts: once its socket is bound it says `{ ready: true }` over IPC, and on
 * `{ untilMs }` (epoch ms) it sends random datagrams from BENCH_FLOOD_SOURCE to BENCH_FLOOD_TARGET (host:port) as fast
 * as one UDP socket sends them until then; then it reports `{ sent, failed, elapsedMs }` and exits. A module of its own
 * with no import but Node's, started ahead, so that a busy machine's slow process start does not eat the attack.
 */
import { randomBytes } from "node:crypto";
import { createSocket } from "node:dgram";

/** Sends kept in flight: enough to keep the socket busy, bounded so that memory stays flat. */
const IN_FLIGHT = 512;

async function main(): Promise<void> {
  const [host, portText] = (process.env.BENCH_FLOOD_TARGET ?? "").split(":");
  const port = Number(portText);
  if (host === undefined || !(port > 0)) throw new Error("BENCH_FLOOD_TARGET (host:port) is required");
  const socket = createSocket("udp4");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(0, process.env.BENCH_FLOOD_SOURCE, () => resolve());
  });
  // Random payloads of 32–512 bytes (a mesh datagram is a few hundred bytes): never a valid message.
  const payloads = Array.from({ length: 256 }, (_, index) => randomBytes(32 + ((index * 37) % 481)));
  const untilMs = await new Promise<number>((resolve) => {
    process.once("message", (message: { untilMs: number }) => resolve(message.untilMs));
    process.send?.({ ready: true });
  });
  let sent = 0;
  let failed = 0;
  let outstanding = 0;
  const startedMs = Date.now();
  await new Promise<void>((resolve) => {
    const sendOne = (): void => {
      outstanding += 1;
      socket.send(payloads[(sent + failed) % payloads.length]!, port, host, (error) => {
        outstanding -= 1;
        if (error) failed += 1;
        else sent += 1;
        if (Date.now() < untilMs) sendOne();
        else if (outstanding === 0) resolve();
      });
    };
    if (Date.now() >= untilMs) resolve();
    else for (let index = 0; index < IN_FLIGHT; index += 1) sendOne();
  });
  socket.close();
  process.send?.({ sent, failed, elapsedMs: Date.now() - startedMs });
  process.disconnect?.();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
