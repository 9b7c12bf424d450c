import { expect } from "chai";
import { callEach, TurnBudget } from "../../../node/api/turnBudget";

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("node/api/turnBudget", () => {
  it("hands out maxPerTurn units per turn and renews them at the turn boundary, calling who waits", async () => {
    const budget = new TurnBudget(3);
    expect([budget.take(), budget.take(), budget.take(), budget.take()]).to.deep.equal([true, true, true, false]);
    let resumed = 0;
    budget.whenRenewed(() => (resumed += 1));
    expect(resumed).to.equal(0);
    await nextTurn();
    expect(resumed).to.equal(1);
    expect(budget.take()).to.equal(true);
    await nextTurn();
    expect(resumed).to.equal(1); // once
  });

  it("refuses bounds that would stall it", () => {
    expect(() => new TurnBudget(0)).to.throw(RangeError, "maxPerTurn");
    expect(() => new TurnBudget(1.5)).to.throw(RangeError, "maxPerTurn");
  });

  it("callEach calls every function even when one throws, and returns the first error", () => {
    const called: string[] = [];
    const first = new Error("first");
    const result = callEach(["a", "b", "c", "d"], (name) => {
      called.push(name);
      if (name === "b") throw first;
      if (name === "c") throw new Error("second");
    });
    expect(called).to.deep.equal(["a", "b", "c", "d"]);
    expect(result).to.deep.equal({ error: first });
    expect(callEach([], () => undefined)).to.equal(null);
  });
});
