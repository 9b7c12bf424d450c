/**
 * The plan (upgrade/plan.ts) is a closed schema: the agent refuses a plan missing any field the rollout needs, with
 * an unknown field, or with a rollout order that is not exactly the plan's hosts. And the agent's sources hold no
 * code path for the forbidden actions: the only writes are staged installs, install.env and the CLI's receipt,
 * the only deletion is the fetch folder it created, and nothing names keys, node config or chain data for writing.
 */
import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { meshSafeParallel, rolloutBatches } from "../../upgrade/batches";
import { UpgradeRefusal } from "../../upgrade/errors";
import { parsePlan, PLAN_VERSION } from "../../upgrade/plan";

const PLAN = {
  version: PLAN_VERSION,
  release: {
    tag: "v0.1.1",
    release_id: "ats-node-0.1.1-0123456789ab",
    source_revision: "0123456789abcdef0123456789abcdef01234567",
    artifact: { kind: "bundle", sha256: "a".repeat(64) },
    source: { dir: "/srv/releases/v0.1.1" },
  },
  network: { manifest: "/etc/ats/manifest.json", trustedRpc: "http://127.0.0.1:8547" },
  nodes: [
    { host: "node-a", role: "primary", rest: "http://127.0.0.1:8080", rpc: "http://127.0.0.1:8547", installRoot: "/var/lib/ats/installs", unit: { kind: "systemd", name: "ats-node.service", installEnvFile: "/etc/ats/install.env" } },
    { host: "node-b", role: "secondary", rest: "http://127.0.0.1:8081", rpc: "http://127.0.0.1:8548", installRoot: "/var/lib/ats/installs-b", unit: { kind: "local", dir: "/var/lib/ats/unit-b" } },
  ],
  rolloutOrder: ["node-b", "node-a"],
  acceptance: { warmupMs: 5_000, timeoutMs: 120_000, maxLogErrors: 0 },
};

function without(path: readonly string[]): unknown {
  const copy = structuredClone(PLAN) as Record<string, unknown>;
  let target = copy;
  for (const key of path.slice(0, -1)) target = target[key] as Record<string, unknown>;
  delete target[path[path.length - 1]!];
  return copy;
}

describe("upgrade: the plan", () => {
  it("accepts a complete plan", () => {
    expect(parsePlan(structuredClone(PLAN)).rolloutOrder).to.deep.equal(["node-b", "node-a"]);
  });

  it("refuses a plan without any one of the fields the issue requires, naming it", () => {
    const required = [
      ["release", "tag"],
      ["release", "release_id"],
      ["release", "source_revision"],
      ["release", "artifact"],
      ["release", "artifact", "sha256"],
      ["release", "source"],
      ["network", "manifest"],
      ["network", "trustedRpc"],
      ["nodes"],
      ["rolloutOrder"],
      ["acceptance", "timeoutMs"],
    ];
    for (const path of required) {
      expect(() => parsePlan(without(path)), path.join("/")).to.throw(UpgradeRefusal, new RegExp(`plan/${path.slice(0, -1).join("/")}`));
    }
  });

  it("refuses unknown fields, a tag instead of a digest, and a rollout order that is not the hosts", () => {
    expect(() => parsePlan({ ...structuredClone(PLAN), force: true })).to.throw(UpgradeRefusal, /plan/);
    const byTag = structuredClone(PLAN);
    (byTag.release.artifact as { sha256: string }).sha256 = "latest";
    expect(() => parsePlan(byTag)).to.throw(UpgradeRefusal, /artifact\/sha256/);
    for (const order of [["node-a"], ["node-a", "node-a"], ["node-a", "node-b", "node-c"]]) {
      expect(() => parsePlan({ ...structuredClone(PLAN), rolloutOrder: order }), order.join(",")).to.throw(UpgradeRefusal, /rolloutOrder/);
    }
    const relative = structuredClone(PLAN);
    relative.nodes[0]!.installRoot = "installs";
    expect(() => parsePlan(relative)).to.throw(UpgradeRefusal, /installRoot/);
  });

  it("takes exactly one artifact: a bundle with its release folder, or an image with container units", () => {
    const image = { kind: "image", registry: "http://127.0.0.1:5000", repository: "ats/node", tag: "0.1.1", digest: `sha256:${"b".repeat(64)}` };
    const containerNode = (host: string) => ({ host, role: "primary", rest: "http://127.0.0.1:8080", rpc: "http://127.0.0.1:8547", unit: { kind: "container", name: "ats-node.service", envFile: "/etc/ats/image.env", container: "ats-node" } });
    const imagePlan = () => {
      const plan = structuredClone(PLAN) as Record<string, unknown> & typeof PLAN;
      const { source: _source, ...release } = plan.release;
      return { ...plan, release: { ...release, artifact: { ...image } }, nodes: [containerNode("node-a"), containerNode("node-b")] } as Record<string, unknown>;
    };
    expect(parsePlan(imagePlan()).release.artifact).to.deep.equal(image);

    const refusals: [string, (plan: Record<string, unknown>) => void, RegExp][] = [
      // both kinds' fields in one artifact
      ["bundle digest beside the image", (plan) => Object.assign((plan.release as { artifact: object }).artifact, { sha256: "a".repeat(64) }), /plan\/release\/artifact: kind "image" with sha256 of the other kind; exactly one artifact/],
      ["no kind", (plan) => delete ((plan.release as { artifact: { kind?: string } }).artifact.kind), /plan\/release\/artifact\/kind: null; exactly one artifact/],
      ["an unknown kind", (plan) => (((plan.release as { artifact: { kind: string } }).artifact.kind = "oci")), /plan\/release\/artifact\/kind: "oci"; exactly one artifact/],
      ["a release folder with an image", (plan) => ((plan.release as Record<string, unknown>).source = { dir: "/srv/releases" }), /plan\/release\/source: Unexpected property/],
      ["a tag instead of the digest", (plan) => (((plan.release as { artifact: { digest: string } }).artifact.digest = "latest")), /plan\/release\/artifact\/digest/],
      ["a registry URL with a path", (plan) => (((plan.release as { artifact: { registry: string } }).artifact.registry = "http://127.0.0.1:5000/v2/evil")), /plan\/release\/artifact\/registry/],
      ["a local unit in an image plan", (plan) => ((plan.nodes as { unit: object }[])[0]!.unit = { kind: "local", dir: "/var/lib/ats/unit-a" }), /plan\/nodes\/0\/unit/],
    ];
    for (const [what, change, pattern] of refusals) {
      const plan = imagePlan();
      change(plan);
      expect(() => parsePlan(plan), what).to.throw(UpgradeRefusal, pattern);
    }
    const digestInBundle = structuredClone(PLAN);
    Object.assign(digestInBundle.release.artifact, { digest: image.digest });
    expect(() => parsePlan(digestInBundle)).to.throw(UpgradeRefusal, /plan\/release\/artifact: kind "bundle" with digest of the other kind/);
    const containerInBundlePlan = structuredClone(PLAN) as { nodes: { unit: object }[] };
    containerInBundlePlan.nodes[0]!.unit = containerNode("node-a").unit;
    expect(() => parsePlan(containerInBundlePlan)).to.throw(UpgradeRefusal, /plan\/nodes\/0\/unit.*\(in a bundle plan/);
  });

  it("takes a node's adopt (upgrade/adopt.ts) only as an approved release of the plan's kind, closed, from the plan's registry", () => {
    const withAdopt = (adopt: unknown, plan: Record<string, unknown> = structuredClone(PLAN)) => ({ ...plan, nodes: (plan.nodes as object[]).map((node, index) => (index === 0 ? { ...node, adopt } : node)) });
    const { release } = structuredClone(PLAN);
    const bundleAdopt = { release: { ...release, release_id: "ats-node-0.1.0-0123456789ab" }, installDir: "/opt/ats-node-by-hand" };
    expect((parsePlan(withAdopt(bundleAdopt)).nodes[0] as { adopt?: unknown }).adopt).to.deep.equal(bundleAdopt);
    expect(() => parsePlan(withAdopt({ release: bundleAdopt.release }))).to.throw(UpgradeRefusal, /plan\/nodes\/0\/adopt\/installDir/);
    expect(() => parsePlan(withAdopt({ ...bundleAdopt, trust: true }))).to.throw(UpgradeRefusal, /plan\/nodes\/0\/adopt\/trust: Unexpected property/);
    expect(() => parsePlan(withAdopt({ ...bundleAdopt, release: { ...bundleAdopt.release, artifact: { kind: "bundle", sha256: "latest" } } }))).to.throw(UpgradeRefusal, /plan\/nodes\/0\/adopt\/release\/artifact/);

    const imageRelease = { tag: "v0.1.0", release_id: "ats-node-0.1.0-0123456789ab", source_revision: release.source_revision, artifact: { kind: "image", registry: "http://127.0.0.1:5000", repository: "ats/node", tag: "0.1.0", digest: `sha256:${"c".repeat(64)}` } };
    const containerNode = (host: string) => ({ host, role: "primary", rest: "http://127.0.0.1:8080", rpc: "http://127.0.0.1:8547", unit: { kind: "container", name: "ats-node.service", envFile: "/etc/ats/image.env", container: "ats-node" } });
    const { source: _source, ...imagePlanRelease } = release;
    const imagePlan = { ...structuredClone(PLAN), release: { ...imagePlanRelease, artifact: { ...imageRelease.artifact, tag: "0.1.1", digest: `sha256:${"b".repeat(64)}` } }, nodes: [containerNode("node-a"), containerNode("node-b")] };
    expect(parsePlan(withAdopt({ release: imageRelease }, imagePlan)).nodes[0]).to.have.property("adopt");
    expect(() => parsePlan(withAdopt({ release: imageRelease, installDir: "/opt/x" }, imagePlan))).to.throw(UpgradeRefusal, /plan\/nodes\/0\/adopt\/installDir: Unexpected property/);
    expect(() => parsePlan(withAdopt(bundleAdopt, imagePlan))).to.throw(UpgradeRefusal, /plan\/nodes\/0\/adopt/);
    const elsewhere = { release: { ...imageRelease, artifact: { ...imageRelease.artifact, registry: "https://registry.example" } } };
    expect(() => parsePlan(withAdopt(elsewhere, imagePlan))).to.throw(UpgradeRefusal, /node-a adopts an image from https:\/\/registry\.example, not the plan's registry http:\/\/127\.0\.0\.1:5000/);
  });
});

describe("upgrade: parallel rollout (maxParallel, upgrade/batches.ts)", () => {
  const roles = { "node-a": "primary", "node-b": "secondary", "node-c": "archive", "node-d": "bridge", "node-e": "primary" } as const;
  const node = (host: keyof typeof roles, index: number) => ({ ...structuredClone(PLAN.nodes[1]!), host, role: roles[host], unit: { kind: "local", dir: `/var/lib/ats/unit-${index}` } });
  const planWith = (order: (keyof typeof roles)[], maxParallel?: unknown) => ({ ...structuredClone(PLAN), nodes: order.map(node), rolloutOrder: order, ...(maxParallel === undefined ? {} : { maxParallel }) });

  it("is optional (one node at a time), an integer from 1 to 16", () => {
    expect(parsePlan(planWith(["node-a", "node-b"])).maxParallel).to.equal(undefined);
    expect(parsePlan(planWith(["node-b", "node-a"], 16)).maxParallel).to.equal(16);
    for (const bad of [0, 17, 1.5, "2", null]) expect(() => parsePlan(planWith(["node-b", "node-a"], bad)), String(bad)).to.throw(UpgradeRefusal, /plan\/maxParallel/);
  });

  it("with maxParallel > 1, refuses a rollout order with a primary before another role, naming both", () => {
    expect(() => parsePlan(planWith(["node-b", "node-a", "node-c"], 2))).to.throw(UpgradeRefusal, /plan\/rolloutOrder: with maxParallel 2 every primary comes after the other roles, but node-c \(archive\) follows primary node-a/);
    // One at a time, the plan's order is the operator's, as before.
    expect(parsePlan(planWith(["node-b", "node-a", "node-c"], 1)).rolloutOrder).to.deep.equal(["node-b", "node-a", "node-c"]);
  });

  it("batches consecutive non-primaries up to maxParallel; a primary is always alone", () => {
    const items = (["node-b", "node-c", "node-d", "node-a", "node-e"] as const).map((host) => ({ host, node: { role: roles[host] } }));
    const hosts = (batches: (typeof items)[]) => batches.map((batch) => batch.map((item) => item.host));
    expect(hosts(rolloutBatches(items, 1))).to.deep.equal([["node-b"], ["node-c"], ["node-d"], ["node-a"], ["node-e"]]);
    expect(hosts(rolloutBatches(items, 2))).to.deep.equal([["node-b", "node-c"], ["node-d"], ["node-a"], ["node-e"]]);
    expect(hosts(rolloutBatches(items, 16))).to.deep.equal([["node-b", "node-c", "node-d"], ["node-a"], ["node-e"]]);
    // A primary between two non-primaries (a resumed one, or maxParallel 1 orders) closes the batch.
    const mixed = [items[0]!, items[3]!, items[1]!, items[2]!];
    expect(hosts(rolloutBatches(mixed, 4))).to.deep.equal([["node-b"], ["node-a"], ["node-c", "node-d"]]);
  });

  it("caps a batch at what the mesh can lose and keep ⌈2n/3⌉ co-signers", () => {
    // n − ⌈2n/3⌉ members may be down: 4 → 1, 5 → 1, 6 → 2, 7 → 2, 10 → 3; never below one at a time.
    expect([4, 5, 6, 7, 10, 31].map((members) => meshSafeParallel(16, members))).to.deep.equal([1, 1, 2, 2, 3, 10]);
    expect(meshSafeParallel(2, 10)).to.equal(2); // the plan's bound when lower
    expect(meshSafeParallel(1, 31)).to.equal(1);
    expect([0, 1].map((members) => meshSafeParallel(5, members))).to.deep.equal([5, 5]); // no mesh: the plan's bound
    expect(meshSafeParallel(16, 3)).to.equal(1); // 3 − 2
    expect(meshSafeParallel(16, 2)).to.equal(1); // 2 − 2 = 0: one at a time all the same
  });
});

describe("upgrade: forbidden actions have no code path", () => {
  const DIR = join(__dirname, "..", "..", "upgrade");
  const sources = readdirSync(DIR)
    .filter((name) => name.endsWith(".ts"))
    .map((name) => ({ name, text: readFileSync(join(DIR, name), "utf8") }));

  /** Files in which `pattern` occurs. */
  const filesWith = (pattern: RegExp) => sources.filter((source) => pattern.test(source.text)).map((source) => source.name).sort();

  it("deletes only its own fetch folder, the extraction it started (inside that folder) and its own temporary files", () => {
    expect(filesWith(/\b(rmSync|rm|unlinkSync|unlink|rmdirSync|rmdir)\(/)).to.deep.equal(["fetchRelease.ts", "installEnv.ts", "tar.ts"]);
    const removals = (name: string) => readFileSync(join(DIR, name), "utf8").match(/rmSync\(([^)]*)\)/g);
    expect(removals("fetchRelease.ts")).to.deep.equal(["rmSync(privateDir, { recursive: true, force: true })"]);
    // A failed extraction removes the folder it was extracting into (fetchRelease gives it one inside privateDir).
    expect(removals("tar.ts")).to.deep.equal(["rmSync(root, { recursive: true, force: true })"]);
    // A failed atomic write removes its own `${file}.tmp-${pid}` (writeTemporary), never a folder.
    expect(removals("installEnv.ts")).to.deep.equal(["rmSync(temporary, { force: true })", "rmSync(temporary, { force: true })"]);
    expect(readFileSync(join(DIR, "installEnv.ts"), "utf8")).to.include("const temporary = `${file}.tmp-${process.pid}`;");
  });

  it("writes only installs, install.env or the image file, the release folder, the local unit's pid file and the receipt", () => {
    expect(filesWith(/\b(writeFileSync|writeFile|renameSync|rename|appendFileSync|copyFileSync|cpSync|chmodSync)\(/)).to.deep.equal([
      "cli.ts", // the receipt (flag wx)
      "fetchRelease.ts", // copies or downloads into its private folder
      "installEnv.ts", // install.env and a container unit's image file (upgrade/containerEnv.ts), each with its .previous; writeFileAtomically
      "installs.ts", // the staged install and its metadata
      "release.ts", // the release folder (npm run release)
      "tar.ts", // extraction into a new stage folder
    ]);
    // writeFileAtomically (installEnv.ts) writes a file's .previous copy there, and one more file: the local unit's node.pid.
    const atomicWrites = sources.flatMap((source) => (source.text.match(/writeFileAtomically\([^,]*,/g) ?? []).map((call) => `${source.name}: ${call}`));
    expect(atomicWrites).to.deep.equal([
      "installEnv.ts: writeFileAtomically(`${file}.previous`,",
      "installEnv.ts: writeFileAtomically(file: string,",
      "localUnit.ts: writeFileAtomically(pidFile,",
    ]);
  });

  it("runs only systemctl, journalctl and, of the container runtime, `container inspect`", () => {
    // Every command the agent runs goes through runCommand (upgrade/systemdUnit.ts); nothing spawns otherwise but
    // the local supervisor's node process.
    const calls = sources.flatMap((source) => (source.text.match(/runCommand\((?!command: string)[^,]+, [^,]+/g) ?? []).map((call) => `${source.name}: ${call}`)).sort();
    expect(calls).to.deep.equal([
      'containerRuntime.ts: runCommand(command, ["container"',
      'containerUnit.ts: runCommand("systemctl", ["restart"',
      'systemdUnit.ts: runCommand("journalctl", ["--unit"',
      'systemdUnit.ts: runCommand("systemctl", args',
    ]);
    expect(filesWith(/(?<![.\w])(execFile|execFileSync|exec|execSync|spawn|spawnSync|fork)\(/)).to.deep.equal(["localUnit.ts", "systemdUnit.ts"]);
  });

  it("never names a key, the node config, data, a tag move or a bind address for writing", () => {
    // These settings and files belong to the node; the agent reads the node over its public interfaces only.
    expect(filesWith(/\b(keyDir|dataDir|keystore|ATS_HOST|restPort|rpcPort|meshPort|meshPeers)\b/)).to.deep.equal([]);
    expect(filesWith(/\bgit\b.*\btag\b|["']tag["']\s*,\s*["']-f/)).to.deep.equal([]);
    expect(filesWith(/from "\.\.\/node\//)).to.deep.equal([]);
  });
});
