/**
 * chronyc `sources` as a picture: for the chosen node, each mesh peer's offset (peer clock − this node's, µs) as a
 * line of points, and its uncertainty (± half the round-trip delay) as a shaded band around it, over the time the
 * page has been open. Drawn with uPlot (canvas) from the MeshHistory the node poll fills.
 */
import uPlot from "uplot";
import { h, render } from "../dom";
import { MeshHistory } from "../meshHistory";
import type { MeshStateView } from "../types";

/** Distinct peer colours (colour-blind safe: Okabe–Ito). */
const COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"];

function colourOf(index: number): string {
  return COLOURS[index % COLOURS.length]!;
}

function withAlpha(hex: string, alpha: number): string {
  const value = Number.parseInt(hex.slice(1), 16);
  return `rgba(${(value >> 16) & 255}, ${(value >> 8) & 255}, ${value & 255}, ${alpha})`;
}

export interface MeshPlot {
  /** Adds a poll of `endpoint`'s mesh state (every node's is kept; the chosen one is drawn). */
  add(endpoint: string, state: MeshStateView, atMs: number): void;
}

export function createMeshPlot(endpoints: readonly string[], elements: { select: HTMLSelectElement; plot: HTMLElement; legend: HTMLElement }): MeshPlot {
  const histories = new Map(endpoints.map((endpoint) => [endpoint, new MeshHistory()]));
  render(elements.select, ...endpoints.map((endpoint, index) => h("option", { value: endpoint }, `node ${index + 1} (${endpoint})`)));
  let chart: uPlot | null = null;
  let chartPeers = "";

  const widthOf = () => Math.max(280, elements.plot.clientWidth);

  const draw = () => {
    const history = histories.get(elements.select.value);
    if (history === undefined) return;
    const aligned = history.aligned();
    const peerKey = aligned.peers.map((peer) => peer.nodeId).join(",");
    elements.plot.dataset.points = String(history.pointCount());
    if (aligned.atS.length === 0) return;
    // Per peer three series: the offset, and its band's upper and lower edges (drawn as fill only).
    const data: uPlot.AlignedData = [
      aligned.atS,
      ...aligned.peers.flatMap((peer) => [
        peer.offsetUs,
        peer.offsetUs.map((offset, i) => (offset === null || peer.uncertaintyUs[i] === null ? null : offset + peer.uncertaintyUs[i]!)),
        peer.offsetUs.map((offset, i) => (offset === null || peer.uncertaintyUs[i] === null ? null : offset - peer.uncertaintyUs[i]!)),
      ]),
    ];
    if (chart === null || chartPeers !== peerKey) {
      chart?.destroy();
      chartPeers = peerKey;
      const series: uPlot.Series[] = [{}];
      const bands: uPlot.Band[] = [];
      aligned.peers.forEach((peer, index) => {
        const colour = colourOf(index);
        const base = 1 + index * 3;
        series.push({ label: `${peer.nodeId.slice(0, 8)}… offset µs`, stroke: colour, width: 1.5, points: { show: true, size: 4, stroke: colour, fill: colour } });
        series.push({ label: "+δ/2", stroke: withAlpha(colour, 0.25), width: 0, points: { show: false } });
        series.push({ label: "−δ/2", stroke: withAlpha(colour, 0.25), width: 0, points: { show: false } });
        bands.push({ series: [base + 1, base + 2], fill: withAlpha(colour, 0.15) });
      });
      chart = new uPlot(
        {
          width: widthOf(),
          height: 260,
          series,
          bands,
          legend: { show: false },
          scales: { x: { time: true } },
          axes: [{}, { label: "offset (µs)", size: 60 }],
        },
        data,
        elements.plot,
      );
      render(
        elements.legend,
        ...aligned.peers.map((peer, index) => h("span", { class: "legend-item" }, h("span", { class: "swatch", style: `background:${colourOf(index)}` }), h("code", { title: peer.nodeId }, `${peer.nodeId.slice(0, 10)}…`))),
        aligned.peers.length === 0 ? h("span", { class: "muted" }, "this node has no mesh peers (a lone node)") : h("span", { class: "muted small" }, "line: offset; band: ± half the round-trip delay"),
      );
    } else {
      chart.setData(data);
    }
  };

  elements.select.addEventListener("change", () => {
    chart?.destroy();
    chart = null;
    draw();
  });
  new ResizeObserver(() => chart?.setSize({ width: widthOf(), height: 260 })).observe(elements.plot);

  return {
    add(endpoint, state, atMs) {
      histories.get(endpoint)?.add(state, atMs);
      if (endpoint === elements.select.value) draw();
    },
  };
}
