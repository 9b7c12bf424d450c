/** What the explorer reads, as the programs publish it (type-only imports: nothing of wire/ enters the bundle). */
export type { ExplorerConfig } from "../../wire/explorer";
export type { MeshStateReport as MeshStateView, MeshPeerReport } from "../../wire/meshState";
