/**
 * JSON-RPC 2.0 to the temporal gateway over fetch (docs/protocol.md §9.5). Answers are parsed losslessly
 * (lossless-json): the gateway sends ns as decimal strings, but in its legacy mode as bare integers above 2^53,
 * which a plain JSON.parse would round; such a number comes back here as its decimal string.
 */
import { isSafeNumber, parse, type LosslessNumber } from "lossless-json";

export class RpcError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    message: string,
    readonly data: unknown,
  ) {
    super(`${method}: ${message} (${code})${data === undefined ? "" : `: ${typeof data === "string" ? data : JSON.stringify(data)}`}`);
    this.name = "RpcError";
  }
}

/** Safe integers as numbers, larger ones as their decimal strings (never a rounded double). */
function losslessValue(_key: string, value: unknown): unknown {
  if (value !== null && typeof value === "object" && (value as LosslessNumber).isLosslessNumber === true) {
    const text = (value as LosslessNumber).value;
    return isSafeNumber(text) ? Number(text) : text;
  }
  return value;
}

export interface Rpc {
  call<T>(method: string, params?: readonly unknown[]): Promise<T>;
}

export function createRpc(url: string, fetchFn: typeof fetch = (...args) => fetch(...args), timeoutMs = 10_000): Rpc {
  let nextId = 1;
  return {
    async call<T>(method: string, params: readonly unknown[] = []): Promise<T> {
      const response = await fetchFn(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await response.text();
      let answer: { result?: unknown; error?: { code: number; message: string; data?: unknown } };
      try {
        answer = parse(text, losslessValue) as typeof answer;
      } catch {
        throw new RpcError(method, -32700, `HTTP ${response.status}, not JSON`, text.slice(0, 200));
      }
      if (answer.error !== undefined) throw new RpcError(method, answer.error.code, answer.error.message, answer.error.data);
      return answer.result as T;
    },
  };
}
