/**
 * The time mesh of one node (docs/protocol.md §7): it measures its peers (sessions.ts), runs consensus rounds as
 * the proposer of its own card's moments (rounds.ts; a primary only), answers its peers' rounds (coSignService.ts),
 * serves relayed proofs when it proposes none (relay.ts), handles tamper alerts (alerts.ts) and watches entries for
 * contradictions (evidence.ts). Mesh is the ConsensusStage the TimeService serves (node/core/cosign.ts).
 */
import { UnavailableError } from "../../protocol/errors";
import type { MeshStateReport, SignedTime } from "../core/types";
import { TamperAlerts } from "./alerts";
import { CoSignService } from "./coSignService";
import { MeshContext, sortByAddress, type MeshOptions, type MeshStats } from "./context";
import { EntryEvidence } from "./evidence";
import { peerReport } from "./peers";
import { RelayedProofs } from "./relay";
import { RoundProposer } from "./rounds";
import { PeerSessions } from "./sessions";

export { relayedProofMaxLeadNs } from "./relay";
export type { MeshOptions, MeshStats, RelayRefusal } from "./context";

export class Mesh {
  readonly #ctx: MeshContext;
  readonly #sessions: PeerSessions;
  readonly #alerts: TamperAlerts;
  readonly #evidence: EntryEvidence;
  readonly #rounds: RoundProposer;
  readonly #relayed: RelayedProofs;

  constructor(options: MeshOptions) {
    const ctx = new MeshContext(options);
    this.#ctx = ctx;
    this.#sessions = new PeerSessions(ctx);
    const coSign = new CoSignService(ctx);
    this.#alerts = new TamperAlerts(ctx, (nodeId) => coSign.forgetRounds(nodeId));
    this.#evidence = new EntryEvidence(ctx);
    this.#rounds = new RoundProposer(ctx, this.#sessions, this.#evidence);
    this.#relayed = new RelayedProofs(ctx, this.#evidence);
  }

  async start(): Promise<{ host: string; port: number }> {
    const { options } = this.#ctx;
    const bound = await options.transport.start().catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
        throw new UnavailableError(`cannot bind the mesh socket (meshPort, UDP): ${code} [env ATS_MESH_PORT]`, { code }, { cause: error });
      }
      throw error;
    });
    options.onListening?.(bound);
    this.#ctx.running = true;
    options.transport.greet();
    this.#sessions.start();
    // Only a primary proposes rounds over its card's moments (§7.6); other roles measure and co-sign, and count
    // a period without a relayed proof as a failed round (they are not Converged on old news).
    if (options.role === "primary") this.#rounds.start();
    else this.#relayed.start();
    return bound;
  }

  async stop(): Promise<void> {
    this.#ctx.running = false;
    this.#relayed.stop();
    this.#sessions.stop();
    await this.#rounds.stop();
    await this.#ctx.options.transport.close();
    this.#ctx.feed.latest = null;
  }

  get latest(): SignedTime | null {
    return this.#ctx.feed.latest;
  }

  get threshold(): number {
    return this.#ctx.threshold;
  }

  /** The latest consensus proof; UnavailableError (with the last round's error) when none is fresh. */
  current(): SignedTime {
    const { tracker, options } = this.#ctx;
    const latest = this.#ctx.feed.latest;
    const ageNs = latest === null ? null : options.card.readTimeNs() - latest.proof.nanoMoment;
    if (latest === null || ageNs! > options.maxProofAgeNs) {
      const why = tracker.lastError ?? (latest === null ? "no round has succeeded yet" : "rounds stalled");
      throw new UnavailableError(`no consensus proof: ${why}`, {
        convergenceState: tracker.state,
        ...(ageNs === null ? {} : { ageNs: ageNs.toString() }),
      });
    }
    return latest;
  }

  onProof(listener: (signed: SignedTime) => void): () => void {
    return this.#ctx.feed.onProof(listener);
  }

  /** A fresh round's proof (rounds.ts RoundProposer.roundNow). */
  roundNow(notBeforeNs?: bigint): Promise<SignedTime> {
    return this.#rounds.roundNow(notBeforeNs);
  }

  /** Broadcasts this node's own tamper alert, signed, to every peer with a session. */
  broadcastTamper(reason: string, atNs: bigint): void {
    this.#alerts.broadcast(reason, atNs);
  }

  state(): MeshStateReport {
    const { stats, tracker, options } = this.#ctx;
    const snapshot = tracker.snapshot();
    return {
      convergenceState: snapshot.state,
      timeQuality: snapshot.timeQuality,
      peerCount: this.#ctx.reachablePeers(),
      members: this.#ctx.members,
      threshold: this.#ctx.threshold,
      consensusOffsetNs: snapshot.consensusOffsetNs === null ? null : snapshot.consensusOffsetNs.toString(),
      lastError: snapshot.lastError,
      role: options.role,
      roundsSucceeded: stats.roundsTotal - Object.values(stats.roundsFailedTotal).reduce((sum, count) => sum + count, 0),
      roundsFailed: { ...stats.roundsFailedTotal },
      peers: sortByAddress([...this.#ctx.peers.values()]).map(peerReport),
      tamperAlerts: this.#alerts.reports(),
      contradictions: this.#evidence.reports(),
      refused: {
        packets: { ...options.transport.drops() },
        coSignRequests: stats.coSignaturesRefusedTotal,
        coSignRequestsByRule: { ...stats.coSignRequestsRefusedByRule },
        relayedProofs: { ...stats.relayedProofsRefusedTotal },
      },
    };
  }

  stats(): MeshStats {
    const stats = this.#ctx.stats;
    return {
      ...stats,
      roundsFailedTotal: { ...stats.roundsFailedTotal },
      coSignRequestsRefusedByRule: { ...stats.coSignRequestsRefusedByRule },
      relayedProofsRefusedTotal: { ...stats.relayedProofsRefusedTotal },
    };
  }

  /** The largest |offset| among reachable peers' best samples, ns (the drift gauge); null without samples. */
  maxPeerOffsetNs(): bigint | null {
    return this.#sessions.maxPeerOffsetNs();
  }
}
