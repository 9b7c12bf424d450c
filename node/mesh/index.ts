/**
 * The mesh of a node (docs/protocol.md §7), built from its settings: `createMeshStage` returns the co-signing
 * stage the TimeService serves (node/core/cosign.ts ConsensusStage), or undefined for a lone node (no meshPeers).
 * node/compose.ts composes it; node/core does not import this folder.
 */
import type { Logger } from "pino";
import { ValidationError } from "../../protocol/errors";
import { nodePublicKeyUncompressed, type NodeKey } from "../../protocol/keys";
import type { Address } from "../../protocol/types";
import { MESH_ROLES, type MeshRole } from "../../wire/mesh";
import type { TimeCard } from "../card/types";
import { advertisedAccuracyNs, type NodeConfig } from "../config";
import type { ConsensusStageDeps, ConsensusStageFactory } from "../core/cosign";
import { Mesh } from "./mesh";
import { MeshTransport, type MeshPeerAddress } from "./transport";

export { Mesh, type MeshOptions, type MeshStats } from "./mesh";
export { MeshTransport, type MeshPeerAddress, type MeshDropReason } from "./transport";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const PACKAGE_VERSION = (require("../../package.json") as { version: string }).version;

/**
 * The card accuracy this member takes part in rounds and probes with, now: a card that proves its own bound (the
 * chrony card) gives that bound at this moment; while it proves none it signs nothing (assertCanSign), and the most
 * it signs (advertisedAccuracyNs: chronyMaxBoundNs) stands in; any other card, the configured accuracyNs.
 */
export function meshCardAccuracyNs(card: Pick<TimeCard, "readTimeNs" | "accuracyBoundNs">, config: NodeConfig): number {
  return card.accuracyBoundNs?.(card.readTimeNs()) ?? advertisedAccuracyNs(config);
}

/**
 * Parses one meshPeers entry, `<nodeId>@<host>:<port>[/<role>]` (the setting's pattern has checked the characters).
 * The role is this node's word on the peer, not the peer's (§7.6); without one the peer is a primary, the `role`
 * setting's default.
 */
export function parseMeshPeer(entry: string): MeshPeerAddress {
  const slash = entry.indexOf("/");
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const role = slash === -1 ? "primary" : entry.slice(slash + 1);
  const at = address.indexOf("@");
  const colon = address.lastIndexOf(":");
  const port = Number(address.slice(colon + 1));
  if (at !== 42 || colon < at || !Number.isInteger(port) || port < 1 || port > 65_535 || !(MESH_ROLES as readonly string[]).includes(role)) {
    throw new ValidationError("config.meshPeers", `"${entry}" is not <0x node id>@<host>:<port 1-65535>[/${MESH_ROLES.join("|")}]`, { entry });
  }
  return { nodeId: address.slice(0, at) as Address, host: address.slice(at + 1, colon), port, role: role as MeshRole };
}

export interface CreateMeshStageParameters {
  readonly config: NodeConfig;
  readonly nodeKey: NodeKey;
  readonly card: TimeCard;
  readonly logger: Logger;
  /** Reports the bound UDP address (the CLI prints it). */
  readonly onListening?: (address: { host: string; port: number }) => void;
}

/**
 * Builds a node's mesh from its settings: the transport (UDP socket, peers from meshPeers) and the Mesh over it.
 * `deps` are what the service hands a ConsensusStageFactory. Throws ValidationError on a bad meshPeers entry.
 */
export function createMesh(parameters: CreateMeshStageParameters, deps: ConsensusStageDeps): { mesh: Mesh; transport: MeshTransport } {
  const { config, nodeKey, card, logger } = parameters;
  const transport = new MeshTransport({
    nodeKey,
    host: config.host,
    port: config.meshPort,
    peers: config.meshPeers.map(parseMeshPeer),
    nodePublicKey: nodePublicKeyUncompressed(nodeKey),
    hello: {
      cardPublicKey: Buffer.from(card.publicKey.slice(2), "hex"),
      certificateChainPem: card.certificateChainPem,
      // The most this card signs (a chrony card's maximum bound): the hello is sent once per connection.
      cardAccuracyNs: advertisedAccuracyNs(config),
      role: config.role as MeshRole,
      version: PACKAGE_VERSION,
    },
    clockNs: () => card.readTimeNs(),
    maxClockSkewMs: config.meshMaxClockSkewMs,
    peerMessageRates: {
      coSignRequestsPerSecond: config.meshPeerCoSignRequestsPerSecond,
      relayedProofsPerSecond: config.meshPeerRelayedProofsPerSecond,
    },
    logger,
  });
  const mesh = new Mesh({
    transport,
    nodeKey,
    card,
    role: config.role as MeshRole,
    // Read at each use (Mesh keeps this object).
    get cardAccuracyNs(): number {
      return meshCardAccuracyNs(card, config);
    },
    assertCanSign: deps.assertCanSign,
    learnCardChain: deps.learnCardChain,
    resolveCard: deps.resolveCard,
    windowNs: config.meshWindowNs,
    roundIntervalMs: config.meshRoundIntervalMs,
    probeIntervalMs: config.meshProbeIntervalMs,
    roundTimeoutMs: config.meshRoundTimeoutMs,
    maxRoundsInFlight: config.meshMaxRoundsInFlight,
    maxPeerUncertaintyNs: config.meshMaxPeerUncertaintyNs,
    coSignSlackNs: config.meshCoSignSlackNs,
    maxProofAgeNs: config.meshMaxProofAgeNs,
    logger,
    ...(parameters.onListening === undefined ? {} : { onListening: parameters.onListening }),
  });
  return { mesh, transport };
}

/** The mesh stage for the service, or undefined when the node has no peers. Throws ValidationError on bad peers. */
export function createMeshStage(parameters: CreateMeshStageParameters): ConsensusStageFactory | undefined {
  if (parameters.config.meshPeers.length === 0) return undefined;
  parameters.config.meshPeers.forEach(parseMeshPeer); // bad entries fail here, before the service is built
  return (deps) => createMesh(parameters, deps).mesh;
}
