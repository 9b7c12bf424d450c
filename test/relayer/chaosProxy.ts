/**
 * A JSON-RPC chaos proxy on 127.0.0.1 in front of a chain: it forwards every request, except that queued faults
 * hit the next requests of their method:
 *
 *   drop-answer   forward (the chain does the work), then close the connection without answering
 *   stale-nonce   answer eth_getTransactionCount with the real value minus `lag`
 *   underpriced   answer eth_sendRawTransaction with "replacement transaction underpriced", forwarding nothing
 *   timeout       hold the request and never answer (the client's timeout fires)
 *   pruned-state  answer with geth's error for state it no longer keeps ("missing trie node"), forwarding nothing
 *
 * Each fault carries how many requests it hits. `hits` counts the faults that fired, so a test can assert that
 * the relayer met them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export type FaultKind = "drop-answer" | "stale-nonce" | "underpriced" | "timeout" | "pruned-state";

export interface Fault {
  method: string;
  kind: FaultKind;
  /** Requests it still hits. */
  remaining: number;
  /** stale-nonce: how far behind the answer is. */
  lag?: number;
}

export interface ChaosProxy {
  readonly url: string;
  inject(fault: Fault): void;
  readonly hits: Record<FaultKind, number>;
  close(): Promise<void>;
}

interface JsonRpcRequest {
  id: unknown;
  method: string;
  params?: unknown[];
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => resolve(body));
    request.on("error", reject);
  });
}

export async function startChaosProxy(upstream: string): Promise<ChaosProxy> {
  const faults: Fault[] = [];
  const hits: Record<FaultKind, number> = { "drop-answer": 0, "stale-nonce": 0, underpriced: 0, timeout: 0, "pruned-state": 0 };
  const sockets = new Set<Socket>();

  function take(method: string): Fault | undefined {
    const fault = faults.find((candidate) => candidate.method === method && candidate.remaining > 0);
    if (fault === undefined) return undefined;
    fault.remaining -= 1;
    hits[fault.kind] += 1;
    return fault;
  }

  async function forward(body: string): Promise<string> {
    const response = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body });
    return response.text();
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readBody(request);
    let call: JsonRpcRequest | undefined;
    try {
      const parsed = JSON.parse(body) as unknown;
      if (!Array.isArray(parsed)) call = parsed as JsonRpcRequest;
    } catch {
      call = undefined;
    }
    const fault = call === undefined ? undefined : take(call.method);
    const reply = (text: string): void => {
      response.writeHead(200, { "content-type": "application/json" }).end(text);
    };
    switch (fault?.kind) {
      case "timeout":
        return; // never answered; the socket is destroyed at close()
      case "pruned-state":
        return reply(JSON.stringify({ jsonrpc: "2.0", id: call!.id, error: { code: -32000, message: "missing trie node 0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c (path ) state is not available" } }));
      case "underpriced":
        return reply(JSON.stringify({ jsonrpc: "2.0", id: call!.id, error: { code: -32000, message: "replacement transaction underpriced" } }));
      case "drop-answer":
        await forward(body);
        response.socket?.destroy();
        return;
      case "stale-nonce": {
        const answer = JSON.parse(await forward(body)) as { result?: string };
        if (typeof answer.result === "string") answer.result = `0x${Math.max(0, Number(BigInt(answer.result)) - (fault.lag ?? 1)).toString(16)}`;
        return reply(JSON.stringify(answer));
      }
      default:
        return reply(await forward(body));
    }
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch(() => response.socket?.destroy());
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    inject: (fault) => faults.push({ ...fault }),
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
