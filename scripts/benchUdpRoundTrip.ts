/**
 * The transport floor under the mesh: a bare cross-process UDP ping-pong on loopback. A child process echoes each
 * datagram at once (no codec, no signature, no event-loop work beyond the echo); this process sends one datagram at a
 * time and times each answer with process.hrtime. bench:mesh reports the mesh's signed accuracy as a ratio to the
 * physical floor this gives (docs/protocol.md §7.2: a reading is known to within half its round trip, plus the card
 * accuracy), measured in the same run as the mesh so that both see the same machine.
 */
import { spawn } from "node:child_process";
import { createSocket } from "node:dgram";
import { once } from "node:events";

/** The echo process: binds an ephemeral loopback port, prints it, answers every datagram with its own bytes. */
const ECHO_SOURCE = `
const socket = require("node:dgram").createSocket("udp4");
socket.on("message", (bytes, from) => socket.send(bytes, from.port, from.address));
socket.bind(0, "127.0.0.1", () => process.stdout.write(socket.address().port + "\\n"));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
`;

/** How long one ping may wait for its echo before the measurement fails, ms (loopback answers in microseconds). */
const PING_TIMEOUT_MS = 1_000;

export interface UdpRoundTrip {
  samples: number;
  /** Best round trip, ns: what the clock filter of docs/protocol.md §7 can at best select. */
  minNs: number;
  p50Ns: number;
}

/** `samples` sequential pings (after `warmup` untimed ones) to an echo in another process. */
export async function measureUdpRoundTrip(samples = 2_000, warmup = 200): Promise<UdpRoundTrip> {
  // stdin is the child's lifeline: it exits when this process closes it or dies.
  const echo = spawn(process.execPath, ["-e", ECHO_SOURCE], { stdio: ["pipe", "pipe", "inherit"] });
  const socket = createSocket("udp4");
  try {
    const [portLine] = (await once(echo.stdout, "data")) as [Buffer];
    const port = Number(portLine.toString().trim());
    if (!Number.isInteger(port) || port <= 0) throw new Error(`the echo process printed no port: ${JSON.stringify(portLine.toString())}`);
    socket.bind(0, "127.0.0.1");
    await once(socket, "listening");
    socket.connect(port, "127.0.0.1");
    await once(socket, "connect");
    const payload = Buffer.alloc(64);
    const roundTripsNs: number[] = [];
    for (let index = 0; index < warmup + samples; index += 1) {
      const answered = once(socket, "message", { signal: AbortSignal.timeout(PING_TIMEOUT_MS) });
      const startNs = process.hrtime.bigint();
      socket.send(payload);
      await answered;
      if (index >= warmup) roundTripsNs.push(Number(process.hrtime.bigint() - startNs));
    }
    roundTripsNs.sort((a, b) => a - b);
    return { samples, minNs: roundTripsNs[0]!, p50Ns: roundTripsNs[Math.floor(roundTripsNs.length / 2)]! };
  } finally {
    socket.close();
    echo.stdin.end();
    if (echo.exitCode === null && echo.signalCode === null) await once(echo, "exit");
  }
}
