/** What the gateway tests share. */
import type { MeshStateReport } from "../../wire/meshState";

/** The mesh state of a lone node that has not converged: what the tests' time source reports. */
export const LONE_NODE_MESH: MeshStateReport = {
  convergenceState: "Initializing",
  timeQuality: 0,
  peerCount: 0,
  members: 1,
  threshold: 1,
  consensusOffsetNs: null,
  lastError: null,
  role: "primary",
  roundsSucceeded: 0,
  roundsFailed: {},
  peers: [],
  tamperAlerts: [],
  contradictions: [],
  refused: { packets: {}, coSignRequests: 0, coSignRequestsByRule: {}, relayedProofs: {} },
};
