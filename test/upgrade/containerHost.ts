/**
 * A host of container nodes without a container runtime (there is no Docker or Podman on this machine), for
 * `ats-upgrade run` on image plans (test/upgrade/containerRun.test.ts):
 *
 * - fake `systemctl`, `journalctl` and `podman` scripts, first on the PATH the agent is given: `systemctl restart`
 *   "runs" the digest the node's image file names (the `running` file, a new pid each start) and records the call;
 *   `podman container inspect <host>` answers with that digest (and an environment a real inspect would carry,
 *   which must never reach a receipt), or "no such container" when stopped; the journal is empty;
 * - one fake node per host on 127.0.0.1 (node:http, a free port): GET /node/info and the temporal JSON-RPC, whose
 *   version and revision are those of the image its container runs (nothing answers while it is stopped); a node
 *   on an `isolated` image never gets its mesh back to Converged;
 * - a trusted node (the same JSON-RPC) and the network manifest. Finality advances with the clock.
 *
 * `close()` stops every server; the folder is the caller's.
 */
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { decodeFunctionData, encodeFunctionResult, type Hex } from "viem";
import { timeOracleAbi } from "../../abi";
import { formatImageEnv, type ImageRecord } from "../../upgrade/containerEnv";
import type { ContainerPlanNode, NodeRole } from "../../upgrade/plan";
import { MANIFEST_VERSION, parseManifest } from "../../wire/manifest";

/** What a node reports when its container runs an image. */
export interface HostImage {
  digest: string;
  version: string;
  revision: string;
  /** The node on this image never reaches its mesh: it stays Isolated (the mesh gate fails). */
  isolated?: boolean;
}

export interface FakeNode {
  host: string;
  /** What it reports in GET /node/info and the plan says. */
  role: NodeRole;
  nodeId: string;
  cardId: string;
  dir: string;
  envFile: string;
  url: string;
  planNode: ContainerPlanNode;
}

/** Something a real `podman inspect` carries (the container's environment): a receipt must never hold it. */
export const INSPECT_SECRET = "inspect-env-value-7f3a9c";
const GENESIS = `0x${createHash("sha256").update("genesis").digest("hex")}`;
/** The mesh the fake nodes report being part of, by default (a 4-member cluster). */
const DEFAULT_MEMBERS = 4;

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function body(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

export class ContainerHost {
  readonly nodes: FakeNode[] = [];
  readonly images = new Map<string, HostImage>();
  readonly bin: string;
  readonly callsFile: string;
  manifestFile = "";
  trustedRpc = "";
  private readonly servers: Server[] = [];
  private readonly startedAtMs = Date.now();
  private readonly hashes = new Map<string, bigint>();

  /** `meshMembers`: the membership every fake node reports (temporal_getMeshState, system_health's peers). */
  constructor(
    readonly root: string,
    readonly meshMembers = DEFAULT_MEMBERS,
  ) {
    this.bin = join(root, "bin");
    this.callsFile = join(root, "calls.log");
  }

  /** The PATH the agent runs its commands with: the fakes first. */
  get env(): NodeJS.ProcessEnv {
    return { PATH: `${this.bin}:${process.env.PATH ?? ""}` };
  }

  /** Starts the trusted node and one node per host, each running `initial` (its image file names it); a host not in `roles` is a primary. */
  async start(hosts: readonly string[], initial: HostImage, record: (image: HostImage) => ImageRecord, roles: Readonly<Record<string, NodeRole>> = {}): Promise<void> {
    mkdirSync(this.bin, { recursive: true });
    this.writeScripts();
    const trusted = await listen((request, response) => void this.rpc(request, response, null));
    this.servers.push(trusted.server);
    this.trustedRpc = trusted.url;
    for (const [index, host] of hosts.entries()) {
      const dir = join(this.root, host);
      mkdirSync(dir);
      const envFile = join(dir, "image.env");
      const node: FakeNode = {
        host,
        role: roles[host] ?? "primary",
        nodeId: `0x${(index + 1).toString(16).padStart(40, "0")}`,
        cardId: `0x${createHash("sha256").update(`card-${host}`).digest("hex")}`,
        dir,
        envFile,
        url: "",
        planNode: undefined as unknown as ContainerPlanNode,
      };
      const served = await listen((request, response) => void this.serveNode(node, request, response));
      this.servers.push(served.server);
      node.url = served.url;
      node.planNode = { host, role: node.role, rest: served.url, rpc: served.url, unit: { kind: "container", name: `${host}.service`, envFile, container: host } };
      this.nodes.push(node);
      this.images.set(initial.digest, initial);
      writeFileSync(envFile, formatImageEnv(record(initial)));
      this.run(node, initial.digest);
    }
    this.manifestFile = join(this.root, "manifest.json");
    const manifest = parseManifest({
      version: MANIFEST_VERSION,
      name: "container-test",
      chain: { evmChainId: 31337, genesisHash: GENESIS, ntsVerified: false },
      services: { rpc: this.trustedRpc, time: this.trustedRpc },
      bootnodes: [],
      meshPeers: [],
      contracts: { TimeOracle: `0x${"11".repeat(20)}` },
      trustedCardRootsPem: [],
    });
    writeFileSync(this.manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
  }

  async close(): Promise<void> {
    await Promise.all(
      this.servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      ),
    );
  }

  /** As a start by the service would: the container runs `digest` (a new pid). */
  run(node: FakeNode, digest: string): void {
    const starts = Number(existsSync(join(node.dir, "starts")) ? readFileSync(join(node.dir, "starts"), "utf8") : "0") + 1;
    writeFileSync(join(node.dir, "starts"), `${starts}\n`);
    writeFileSync(join(node.dir, "running"), `${digest}\n`);
  }

  /** From now on the node's service runs `digest` whatever its image file names (e.g. a tag pinned in ExecStart). */
  /** The node's service fails every restart from its `count`-th on (a rollback that cannot start the old image). */
  failRestartsFrom(node: FakeNode, count: number): void {
    writeFileSync(join(node.dir, "fail-from"), `${count}\n`);
  }

  pin(node: FakeNode, digest: string): void {
    writeFileSync(join(node.dir, "pinned"), `@${digest}\n`);
  }

  /** The digest the node's container runs, or null when stopped. */
  running(node: FakeNode): string | null {
    const file = join(node.dir, "running");
    return existsSync(file) ? readFileSync(file, "utf8").trim() : null;
  }

  /** The systemctl calls, in order. */
  calls(): string[] {
    return existsSync(this.callsFile) ? readFileSync(this.callsFile, "utf8").trim().split("\n") : [];
  }

  private writeScripts(): void {
    const root = this.root;
    // `restart` (and `start` of a stopped service) runs what the image file names now, or what `pinned` names (a
    // service that ignores the file); anything else is refused, so a stray stop, pull or removal shows up.
    writeFileSync(
      join(this.bin, "systemctl"),
      `#!/bin/sh
echo "systemctl $*" >> "${this.callsFile}"
dir="${root}/\${2%.service}"
case "$1" in
  restart|start)
    if [ "$1" = start ] && [ -f "$dir/running" ]; then exit 0; fi
    if [ -f "$dir/fail-from" ] && [ $(( $(cat "$dir/starts" 2>/dev/null || echo 0) + 1 )) -ge $(cat "$dir/fail-from") ]; then
      echo "Job for $2 failed" >&2; exit 1
    fi
    image=$(sed -n 's/^ATS_IMAGE=//p' "$dir/image.env")
    if [ -f "$dir/pinned" ]; then image=$(cat "$dir/pinned"); fi
    echo $(( $(cat "$dir/starts" 2>/dev/null || echo 0) + 1 )) > "$dir/starts"
    echo "\${image#*@}" > "$dir/running" ;;
  *) echo "unexpected verb $1" >&2; exit 1 ;;
esac
`,
    );
    writeFileSync(
      join(this.bin, "podman"),
      `#!/bin/sh
[ "$1 $2" = "container inspect" ] || { echo "unexpected podman $*" >&2; exit 1; }
dir="${root}/$3"
if [ ! -f "$dir/running" ]; then echo "Error: no such container $3" >&2; exit 125; fi
printf '[{"Id":"%s","State":{"Running":true,"Pid":%s},"ImageDigest":"%s","Config":{"Env":["ATS_EXTRA=${INSPECT_SECRET}"]}}]\\n' "$3" $(( 40000 + $(cat "$dir/starts") )) "$(cat "$dir/running")"
`,
    );
    writeFileSync(join(this.bin, "journalctl"), "#!/bin/sh\nexit 0\n");
    for (const name of ["systemctl", "podman", "journalctl"]) chmodSync(join(this.bin, name), 0o755);
  }

  private finalized(): bigint {
    return 10n + BigInt(Math.floor((Date.now() - this.startedAtMs) / 100));
  }

  private blockHash(number: bigint): string {
    if (number === 0n) return GENESIS;
    const hash = `0x${createHash("sha256").update(`block-${number}`).digest("hex")}`;
    this.hashes.set(hash, number);
    return hash;
  }

  /** The image a node's container runs, or null when it is stopped (then nothing answers, as a stopped node). */
  private imageOf(node: FakeNode): HostImage | null {
    const digest = this.running(node);
    return digest === null ? null : (this.images.get(digest) ?? null);
  }

  private async serveNode(node: FakeNode, request: IncomingMessage, response: ServerResponse): Promise<void> {
    const image = this.imageOf(node);
    if (image === null) {
      response.writeHead(503).end();
      return;
    }
    if (request.method === "GET" && request.url === "/node/info") {
      response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ nodeId: node.nodeId, cardId: node.cardId, version: image.version, revision: image.revision, role: node.role }));
      return;
    }
    await this.rpc(request, response, image);
  }

  /** The temporal JSON-RPC of a node on `image`, or of the trusted node (null). */
  private async rpc(request: IncomingMessage, response: ServerResponse, image: HostImage | null): Promise<void> {
    const call = JSON.parse(await body(request)) as { id: number; method: string; params: unknown[] };
    const hex = (value: unknown) => BigInt(value as string);
    const results: Record<string, () => unknown> = {
      eth_chainId: () => "0x7a69",
      chain_getBlockHash: () => this.blockHash(typeof call.params[0] === "number" ? BigInt(call.params[0]) : hex(call.params[0])),
      chain_getFinalizedHead: () => this.blockHash(this.finalized()),
      eth_getBlockByHash: () => {
        const number = this.hashes.get(String(call.params[0]));
        return number === undefined ? null : { number: `0x${number.toString(16)}` };
      },
      system_health: () => ({ peers: this.meshMembers - 1, isSyncing: false }),
      temporal_getMeshState: () => ({ convergenceState: image?.isolated === true ? "Isolated" : "Converged", members: this.meshMembers }),
      temporal_getValidatorTimeQuality: () => ({ timeQuality: 90 }),
      eth_call: () => {
        const { functionName } = decodeFunctionData({ abi: timeOracleAbi, data: (call.params[0] as { data: Hex }).data });
        if (functionName === "getNode") return encodeFunctionResult({ abi: timeOracleAbi, functionName, result: { validFromNs: 1n, validUntilNs: 2n ** 62n, status: 1 } });
        if (functionName === "getCard") {
          return encodeFunctionResult({ abi: timeOracleAbi, functionName, result: { publicKeyX: `0x${"01".repeat(32)}`, publicKeyY: `0x${"02".repeat(32)}`, validFromNs: 1n, validUntilNs: 2n ** 62n, status: 1 } });
        }
        throw new Error(`the fake node's eth_call answers getNode and getCard only, not ${functionName}`);
      },
    };
    const answer = results[call.method];
    const payload = answer === undefined ? { jsonrpc: "2.0", id: call.id, error: { code: -32601, message: `no method ${call.method}` } } : { jsonrpc: "2.0", id: call.id, result: answer() };
    response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(payload));
  }
}
