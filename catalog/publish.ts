/**
 * What the evidence gateway serves, and where it comes from: the catalog publishes into its store (nothing else
 * can, catalog/ipfs.ts has no upload route)
 * - every file of every release the downloads service offers (so a release can be fetched by identifier too);
 * - the contradiction evidence the mesh's nodes hold (GET /mesh/state `contradictions[].evidence`, docs/protocol.md
 *   §7.8), read from each configured node, validated against the node's schema, and stored as the evidence's JSON
 *   text, which `ats-node evidence check <url>` accepts.
 * Every source is bounded: file sizes by the store's bound, node answers by MAX_MESH_STATE_BYTES and a deadline.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Value } from "@sinclair/typebox/value";
import { MeshStateBody } from "../wire/rest";
import { rootCauseMessage } from "../protocol/errors";
import type { ContentStore } from "./contentStore";
import { listReleases } from "./downloads";

/** Largest GET /mesh/state answer read (32 reports of a few kB each, 32 peers). */
export const MAX_MESH_STATE_BYTES = 1024 * 1024;

export interface PublishedEvidence {
  readonly nodeId: string;
  /** The node whose /mesh/state held it. */
  readonly reportedBy: string;
  readonly foundAtNs: string;
  readonly cid: string;
}

/** Stores every file of every release under `releasesDir`; returns release path → identifier (`/releases/<id>/<file>`). */
export function publishReleases(store: ContentStore, releasesDir: string): Map<string, string> {
  const published = new Map<string, string>();
  for (const release of listReleases(releasesDir)) {
    for (const file of release.files) {
      const path = join(releasesDir, release.releaseId, file.name);
      if (statSync(path).size > store.maxContentBytes) continue; // served by the downloads service only
      published.set(file.path, store.put(readFileSync(path)));
    }
  }
  return published;
}

/** GET `<nodeUrl>/mesh/state` within the bounds, validated; throws an Error naming the node and what was wrong. */
async function readMeshState(nodeUrl: string, timeoutMs: number): Promise<MeshStateBody> {
  const url = new URL("/mesh/state", nodeUrl);
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "error" });
  if (response.status !== 200) throw new Error(`${url.href} answered ${response.status}`);
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > MAX_MESH_STATE_BYTES) throw new Error(`${url.href} declares ${declared} bytes, over ${MAX_MESH_STATE_BYTES}`);
  const text = await response.text();
  if (Buffer.byteLength(text) > MAX_MESH_STATE_BYTES) throw new Error(`${url.href} sent over ${MAX_MESH_STATE_BYTES} bytes`);
  const body: unknown = JSON.parse(text);
  const problem = Value.Errors(MeshStateBody, body).First();
  if (problem !== undefined) throw new Error(`${url.href} is not a node's mesh state: ${problem.path || "/"} ${problem.message}`);
  return body as MeshStateBody;
}

export interface EvidencePublication {
  readonly evidence: PublishedEvidence[];
  /** One line per node that could not be read this time. */
  readonly failures: string[];
}

/** Reads each node's contradiction reports and stores their evidence. A node that fails is reported, not fatal. */
export async function publishMeshEvidence(store: ContentStore, nodeUrls: readonly string[], timeoutMs: number): Promise<EvidencePublication> {
  const evidence: PublishedEvidence[] = [];
  const failures: string[] = [];
  for (const nodeUrl of nodeUrls) {
    let state: MeshStateBody;
    try {
      state = await readMeshState(nodeUrl, timeoutMs);
    } catch (error) {
      failures.push(`${nodeUrl}: ${rootCauseMessage(error)}`);
      continue;
    }
    for (const report of state.contradictions) {
      const cid = store.put(Buffer.from(JSON.stringify(report.evidence)));
      evidence.push({ nodeId: report.nodeId, reportedBy: nodeUrl, foundAtNs: report.foundAtNs, cid });
    }
  }
  return { evidence, failures };
}
