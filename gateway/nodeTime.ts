/**
 * Consensus time for `ats-gateway`, the gateway in a process of its own: the mesh state of an attesting node read
 * over REST (GET /mesh/state, checked against its schema), its consensus offset applied to this host's clock. The
 * nodes are tried in order; the first that answers is kept until it stops answering. When none has answered for
 * `staleAfterMs`, consensus time is unknown and both readers throw UnavailableError (JSON-RPC -32003), so a
 * block is never stamped with an offset nobody vouches for. In process, node/server.ts gives the gateway the
 * node's own clock instead (the seam of ./methods.ts TemporalTimeSource).
 */
import { Value } from "@sinclair/typebox/value";
import type { Logger } from "pino";
import { UnavailableError } from "../protocol/errors";
import { API_KEY_HEADER } from "../wire/auth";
import type { MeshStateReport } from "../wire/meshState";
import { MeshStateBody } from "../wire/rest";
import type { TemporalTimeSource } from "./methods";

export interface FollowNodeTimeOptions {
  nodeUrls: readonly string[];
  /** Sent as the API-key header when not empty. */
  apiKey: string;
  pollIntervalMs: number;
  staleAfterMs: number;
  logger: Logger;
  /** This host's clock, ns since the Unix epoch (tests pass their own). */
  hostNowNs?: () => bigint;
}

export interface NodeTimeFollower extends TemporalTimeSource {
  /** The node read last, "" before any answered. */
  currentNodeUrl(): string;
  close(): void;
}

/** The wall clock at ms resolution, advanced by the monotonic clock between readings (never steps backwards). */
export function hostClockNs(): () => bigint {
  const anchorNs = BigInt(Date.now()) * 1_000_000n;
  const anchorHr = process.hrtime.bigint();
  return () => anchorNs + (process.hrtime.bigint() - anchorHr);
}

/** Starts following; resolves after the first round of reads (answered or not: a node may come up later). */
export async function followNodeTime(options: FollowNodeTimeOptions): Promise<NodeTimeFollower> {
  const hostNowNs = options.hostNowNs ?? hostClockNs();
  const headers: Record<string, string> = options.apiKey === "" ? {} : { [API_KEY_HEADER]: options.apiKey };
  let current = 0;
  let last: { state: MeshStateReport; url: string; atMs: number } | undefined;
  let lastWarnMs = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  async function read(url: string): Promise<MeshStateReport> {
    const response = await fetch(`${url}/mesh/state`, { headers, signal: AbortSignal.timeout(Math.max(options.pollIntervalMs, 1_000)) });
    if (response.status !== 200) throw new Error(`GET /mesh/state answered ${response.status}`);
    const body: unknown = await response.json();
    const problem = Value.Errors(MeshStateBody, body).First();
    if (problem !== undefined) throw new Error(`GET /mesh/state is not a mesh state: ${problem.path || "/"} ${problem.message}`);
    return body as MeshStateReport;
  }

  async function poll(): Promise<void> {
    const failures: string[] = [];
    for (let tried = 0; tried < options.nodeUrls.length; tried++) {
      const index = (current + tried) % options.nodeUrls.length;
      const url = options.nodeUrls[index]!;
      try {
        last = { state: await read(url), url, atMs: performance.now() };
        if (index !== current) options.logger.warn({ node: url }, "temporal gateway: reading consensus time from another node");
        current = index;
        return;
      } catch (error) {
        failures.push(`${url}: ${(error as Error).message}`);
      }
    }
    if (performance.now() - lastWarnMs > 10_000) {
      options.logger.warn({ failures }, "temporal gateway: no node answered its mesh state; retried");
      lastWarnMs = performance.now();
    }
  }

  function fresh(): { state: MeshStateReport; url: string } {
    if (last === undefined || performance.now() - last.atMs > options.staleAfterMs) {
      throw new UnavailableError("Consensus time unknown: no attesting node answered", { nodeUrls: options.nodeUrls.join(", "), staleAfterMs: options.staleAfterMs });
    }
    return last;
  }

  const loop = (): void => {
    if (closed) return;
    timer = setTimeout(() => void poll().finally(loop), options.pollIntervalMs);
  };
  await poll();
  loop();

  return {
    consensusNowNs: () => hostNowNs() + BigInt(fresh().state.consensusOffsetNs ?? "0"),
    meshState: () => fresh().state,
    currentNodeUrl: () => last?.url ?? "",
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
