/**
 * Tamper alerts (docs/protocol.md §7.6): this node's own, signed and sent to every peer, and its peers' about
 * themselves, verified (only the node itself can sign an alert about its card, so a forged one frames nobody).
 * A verified alert excludes its peer from rounds and co-signing; alerts are kept one per card, at most
 * MAX_TAMPER_ALERTS, for GET /mesh/state and the relayer's guardian.
 */
import type { Address, Hex } from "../../protocol/types";
import { alertSignedBy, signAlert, type MeshPayload } from "../../wire/mesh";
import { MAX_TAMPER_ALERTS } from "../../wire/rest";
import type { TamperAlertReport } from "../core/types";
import type { MeshContext } from "./context";
import type { MeshPeerLink } from "./transport";

export class TamperAlerts {
  readonly #ctx: MeshContext;
  /** Told when a peer is excluded by its own alert. */
  readonly #onExcluded: (nodeId: Address) => void;
  readonly #alerts: TamperAlertReport[] = [];

  constructor(ctx: MeshContext, onExcluded: (nodeId: Address) => void) {
    this.#ctx = ctx;
    this.#onExcluded = onExcluded;
    ctx.options.transport.handle("alert", (link, payload) => this.#accept(link, payload));
  }

  reports(): TamperAlertReport[] {
    return [...this.#alerts];
  }

  /** Broadcasts this node's own tamper alert, signed, to every peer with a session. */
  broadcast(reason: string, atNs: bigint): void {
    const { card, nodeKey, transport } = this.#ctx.options;
    const signature = signAlert(nodeKey, this.#ctx.self, card.cardId, atNs, reason);
    this.#remember({ nodeId: this.#ctx.self, cardId: card.cardId.toLowerCase() as Hex, reason, atNs: atNs.toString(), signature: `0x${signature.toString("hex")}` });
    for (const peer of this.#ctx.peers.values()) {
      transport.notify(peer.nodeId, { kind: "alert", alert: { kind: "tamper", cardId: card.cardId, reason, atNs, signature } });
    }
  }

  /** Keeps a verified alert (one per card, the first), at most MAX_TAMPER_ALERTS. */
  #remember(alert: TamperAlertReport): void {
    if (this.#alerts.some((held) => held.cardId.toLowerCase() === alert.cardId.toLowerCase())) return;
    if (this.#alerts.length >= MAX_TAMPER_ALERTS) return;
    this.#alerts.push(alert);
  }

  #accept(link: MeshPeerLink, payload: MeshPayload): null {
    if (payload.kind !== "alert") return null;
    const peer = this.#ctx.peer(link.nodeId);
    const { alert } = payload;
    // Cheap check first: a peer already excluded by its own alert costs no further signature recovery.
    if (peer?.excludedReason != null) return null;
    if (peer === undefined || !alertSignedBy(alert, peer.nodeId) || (peer.cardId !== null && alert.cardId.toLowerCase() !== peer.cardId.toLowerCase())) {
      this.#ctx.logger.warn({ sender: link.nodeId, cardId: alert.cardId }, "tamper alert refused: not signed by the node it is about, or not its card");
      return null;
    }
    if (peer.excludedReason === null) {
      peer.excludedReason = `tamper alert: ${alert.reason}`;
      this.#onExcluded(link.nodeId);
      this.#ctx.logger.error({ peer: peer.nodeId, cardId: alert.cardId, reason: alert.reason }, "peer reported its card tampered: excluded from rounds and co-signing");
      const signature: Hex = `0x${alert.signature.toString("hex")}`;
      this.#remember({ nodeId: peer.nodeId, cardId: alert.cardId.toLowerCase() as Hex, reason: alert.reason, atNs: alert.atNs.toString(), signature });
      this.#ctx.options.onTamperAlert?.({ nodeId: peer.nodeId, cardId: alert.cardId, reason: alert.reason, atNs: alert.atNs, signature });
    }
    return null;
  }
}
