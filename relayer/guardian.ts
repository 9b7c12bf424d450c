/**
 * The guardian (off by default, setting `guardianEnabled`): reads the signed tamper alerts the attesting nodes
 * hold (GET /mesh/state, `tamperAlerts`, docs/protocol.md §7.6), keeps those whose signature is the node's own,
 * and turns each into one revocation per chain (relayer/worker.ts, decideRevoke: once, and only when the signer
 * is an active node of that chain's oracle). The relayer's signer must hold GUARDIAN_ROLE on every oracle; the
 * start-up check says so otherwise.
 *
 * What it trusts: the alert's signature proves that the node key signed "my card <cardId> is tampered". That the
 * card is that node's card is what the serving node checked (it accepts an alert only for the card its peer's hello
 * presented); the oracle keeps no card-to-node binding to check it against.
 */
import { Value } from "@sinclair/typebox/value";
import type { Address, Hex } from "../protocol/types";
import { alertSignedBy } from "../wire/mesh";
import { TamperAlertJson } from "../wire/rest";
import type { RevokePayload } from "./worker";

/** How long one node may take to answer GET /mesh/state, ms. */
const FETCH_TIMEOUT_MS = 2_000;

/** The verified alerts one node reports; a node that fails to answer or answers garbage contributes none. */
export async function fetchTamperAlerts(endpoint: string): Promise<RevokePayload[]> {
  let body: unknown;
  try {
    const response = await fetch(`${endpoint.replace(/\/+$/, "")}/mesh/state`, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (!response.ok) return [];
    body = await response.json();
  } catch {
    return [];
  }
  const alerts = (body as { tamperAlerts?: unknown } | null)?.tamperAlerts;
  if (!Array.isArray(alerts)) return [];
  const verified: RevokePayload[] = [];
  for (const alert of alerts.slice(0, 64)) {
    if (!Value.Check(TamperAlertJson, alert)) continue;
    const signature = Buffer.from(alert.signature.slice(2), "hex");
    const payload = { kind: "tamper" as const, cardId: alert.cardId as Hex, reason: alert.reason, atNs: BigInt(alert.atNs), signature };
    if (!alertSignedBy(payload, alert.nodeId as Address)) continue;
    verified.push({ cardId: alert.cardId as Hex, nodeId: alert.nodeId as Address, reason: alert.reason, atNs: alert.atNs, signature: alert.signature as Hex });
  }
  return verified;
}

/** Every node's verified alerts, one per card (the first seen). */
export async function collectTamperAlerts(endpoints: readonly string[]): Promise<RevokePayload[]> {
  const byCard = new Map<string, RevokePayload>();
  for (const alerts of await Promise.all(endpoints.map(fetchTamperAlerts))) {
    for (const alert of alerts) if (!byCard.has(alert.cardId)) byCard.set(alert.cardId, alert);
  }
  return [...byCard.values()];
}
