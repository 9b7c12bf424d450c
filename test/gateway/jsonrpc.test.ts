/**
 * The gateway's JSON-RPC framing (gateway/jsonrpc.ts), pure: what a body is refused for as a whole, before any
 * item is looked at, and the bound on a batch's answer.
 */
import { expect } from "chai";
import { errorResponse, MAX_JSON_DEPTH, parseBody, scanJson, serializeBatch } from "../../gateway/jsonrpc";

const call = (id: number) => ({ jsonrpc: "2.0", id, method: "eth_chainId" });

describe("gateway JSON-RPC framing (gateway/jsonrpc)", () => {
  it("refuses a batch longer than the limit as a whole, with one short error, however many items it holds", () => {
    const body = `[${Array.from({ length: 130_000 }, () => "1").join(",")}]`;
    const parsed = parseBody(body, 100);
    expect(parsed.kind).to.equal("error");
    if (parsed.kind !== "error") return;
    expect(parsed.response).to.deep.equal(errorResponse(null, -32600, "Invalid Request", "a batch of more than 100 items"));
    expect(parseBody(JSON.stringify([call(1), call(2)]), 2).kind).to.equal("batch");
    expect(parseBody(JSON.stringify([call(1), call(2), call(3)]), 2).kind).to.equal("error");
    // Commas inside strings or nested values are not items.
    expect(parseBody(JSON.stringify([{ ...call(1), params: [1, 2, 3, "a,b,c"] }, call(2)]), 2).kind).to.equal("batch");
  });

  it("stops scanning at the first item past the limit: refusing a huge batch costs what its first items cost", () => {
    // A body whose tail is not even JSON: the scan never reaches it, so the refusal is the batch limit's.
    const huge = `[1,2,3,${"x".repeat(1_000_000)}`;
    expect(scanJson(Buffer.from(huge), 32, 3)).to.equal("too-many-items");
    expect(parseBody(huge, 3)).to.deep.equal({ kind: "error", response: errorResponse(null, -32600, "Invalid Request", "a batch of more than 3 items") });
    expect(scanJson(Buffer.from("[1,2,3]"), 32, 3)).to.equal("ok");
    expect(scanJson(Buffer.from('  [1,"2,3",[4,5]]'), 32, 3)).to.equal("ok");
    expect(scanJson(Buffer.from('{"a":1,"b":2,"c":3,"d":4}'), 32, 3)).to.equal("ok");
    // Multi-byte characters never hide a delimiter: "é,ü" is one string.
    expect(scanJson(Buffer.from('["é,ü","€"]'), 32, 2)).to.equal("ok");
  });

  it("refuses a body that is not UTF-8 as a parse error, and reads a valid one from its bytes", () => {
    const valid = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "system_chain", params: ["é"] }));
    const parsed = parseBody(valid, 1);
    expect(parsed.kind === "single" && parsed.item.ok && parsed.item.call.params).to.deep.equal(["é"]);
    const invalid = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"system_chain","params":["'), Buffer.from([0xff, 0xfe]), Buffer.from('"]}')]);
    expect(parseBody(invalid, 1)).to.deep.equal({ kind: "error", response: errorResponse(null, -32700, "Parse error", "the body is not valid UTF-8") });
    // An overlong encoding of "/" and a lone surrogate encoded as UTF-8 are not UTF-8 either.
    expect(parseBody(Buffer.from([0x22, 0xc0, 0xaf, 0x22]), 1).kind).to.equal("error");
    expect(parseBody(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22]), 1).kind).to.equal("error");
  });

  it(`refuses arrays and objects nested deeper than ${MAX_JSON_DEPTH} levels with -32600, before JSON.parse`, () => {
    const nested = (depth: number) => `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":${"[".repeat(depth)}${"]".repeat(depth)}}`;
    // The request object is one level, so params may nest MAX_JSON_DEPTH - 1 deep.
    expect(parseBody(nested(MAX_JSON_DEPTH - 1), 1).kind).to.equal("single");
    expect(parseBody(nested(MAX_JSON_DEPTH), 1)).to.deep.equal({ kind: "error", response: errorResponse(null, -32600, "Invalid Request", `arrays and objects nested deeper than ${MAX_JSON_DEPTH} levels`) });
    expect(parseBody(nested(10_000), 1).kind).to.equal("error");
    // Unclosed brackets far beyond the limit: the scan answers, not the parser.
    expect(parseBody("[".repeat(1_000_000), 1).kind).to.equal("error");
  });

  it("counts depth outside strings only: brackets and escaped quotes inside a string do not nest", () => {
    expect(scanJson(Buffer.from(`["${"[".repeat(100)}"]`), 2, 100)).to.equal("ok");
    expect(scanJson(Buffer.from(`["\\"${"[".repeat(100)}"]`), 2, 100)).to.equal("ok");
    expect(scanJson(Buffer.from(`["\\\\", [[[]]]]`), 3, 100)).to.equal("too-deep");
    expect(scanJson(Buffer.from("[[[]]]"), 3, 100)).to.equal("ok");
  });

  it("keeps a batch's answer within the byte budget: answers past it become short -32006 errors with their ids", () => {
    const answer = (id: number) => ({ id, json: JSON.stringify({ jsonrpc: "2.0", id, result: "x".repeat(400) }) });
    const answers = [1, 2, 3, 4, 5].map(answer);
    const text = serializeBatch(answers, 1_000);
    const parsed = JSON.parse(text) as { id: number; result?: string; error?: { code: number; data: string } }[];
    expect(parsed.map((item) => item.id)).to.deep.equal([1, 2, 3, 4, 5]);
    expect(parsed.slice(0, 2).every((item) => item.result !== undefined)).to.equal(true);
    for (const item of parsed.slice(2)) expect(item.error).to.deep.include({ code: -32006, data: "the batch's answer would exceed 1000 bytes; split the batch" });
    expect(Buffer.byteLength(text)).to.be.below(1_000 + 3 * 160);
    // Within the budget, the answers go out untouched.
    expect(serializeBatch(answers, 10_000)).to.equal(`[${answers.map((a) => a.json).join(",")}]`);
  });
});
