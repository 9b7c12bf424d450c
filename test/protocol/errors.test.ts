import { expect } from "chai";
import { AtsError, ConsensusError, ProtocolError, RateLimitError, ValidationError } from "../../protocol";

describe("errors", () => {
  it("carry a stable code and evidence", () => {
    const error = new ProtocolError("nodeSignature must be a multiple of 80 bytes", { actualBytes: 79 });
    expect(error).to.be.instanceOf(AtsError).and.instanceOf(Error);
    expect(error.code).to.equal("PROTOCOL");
    expect(error.name).to.equal("ProtocolError");
    expect(error.details).to.deep.equal({ actualBytes: 79 });
  });

  it("name the field of a validation error", () => {
    const error = new ValidationError("proof.accuracyNs", "must be an integer");
    expect(error.field).to.equal("proof.accuracyNs");
    expect(error.message).to.equal("proof.accuracyNs: must be an integer");
    expect(error.details).to.include({ field: "proof.accuracyNs" });
  });

  it("use the messages docs/protocol.md §11.3 fixes", () => {
    expect(new RateLimitError().message).to.equal("Rate limit exceeded");
    expect(new ConsensusError(ConsensusError.INSUFFICIENT_RESPONSES).message).to.equal("Insufficient node responses");
    expect(new ConsensusError(ConsensusError.DIVERGENCE_TOO_HIGH).message).to.equal("Time divergence too high");
  });

  it("let a quota other than the request rate name itself, still as a RATE_LIMIT error with its cause", () => {
    const cause = new Error("inner");
    const quota = new RateLimitError({ pending: 2 }, { message: "too many pending schedules for this client (2, limit 2)", cause });
    expect(quota).to.include({ code: "RATE_LIMIT", message: "too many pending schedules for this client (2, limit 2)", cause });
    expect(new RateLimitError({}, { cause }).message).to.equal(RateLimitError.MESSAGE);
  });

  it("walk the cause chain like viem's BaseError", () => {
    const root = new TypeError("socket closed");
    const middle = new ProtocolError("decode failed", {}, { cause: root });
    const top = new ValidationError("proof", "unusable", {}, { cause: middle });
    expect(top.walk()).to.equal(root);
    expect(top.walk((e) => e instanceof ProtocolError)).to.equal(middle);
    expect(top.walk((e) => e instanceof RateLimitError)).to.equal(undefined);
  });
});
