/**
 * The layer rules of docs/architecture.md are enforced by ESLint (eslint.config.js): these tests lint small
 * sources as if they stood at a given path, so a rule that stopped matching would fail here, not silently.
 */
import { expect } from "chai";
import { ESLint } from "eslint";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");

async function restrictedImports(relativePath: string, source: string): Promise<string[]> {
  const eslint = new ESLint({ cwd: ROOT });
  const [result] = await eslint.lintText(source, { filePath: join(ROOT, relativePath) });
  return (result?.messages ?? []).filter((message) => message.ruleId === "no-restricted-imports").map((message) => message.message);
}

describe("layer rules (eslint.config.js)", function () {
  this.timeout(60_000);

  it("refuses protocol/ importing a program, a script or a test", async () => {
    for (const target of ["../node/core/service", "../scripts/deploy", "../test/vectors/build-vectors"]) {
      const messages = await restrictedImports("protocol/example.ts", `import { x } from "${target}";\nexport const y = x;\n`);
      expect(messages, target).to.have.length(1);
      expect(messages[0]).to.contain("protocol/ is the bottom layer");
    }
  });

  it("refuses the client library importing the server", async () => {
    const messages = await restrictedImports("client/rest.ts", `import { startNode } from "../node/server";\nexport const y = startNode;\n`);
    expect(messages).to.have.length(1);
    expect(messages[0]).to.contain("must not load the server");
    const wire = await restrictedImports("wire/grpc.ts", `import { startNode } from "../node/server";\nexport const y = startNode;\n`);
    expect(wire).to.have.length(1);
    expect(wire[0]).to.contain("wire/ holds what client and node agree on");
  });

  it("refuses the gateway importing the node (it is a program of its own)", async () => {
    const messages = await restrictedImports("gateway/methods.ts", `import { startNode } from "../node/server";\nexport const y = startNode;\n`);
    expect(messages).to.have.length(1);
    expect(messages[0]).to.contain("temporal gateway is a program of its own");
    expect(await restrictedImports("gateway/methods.ts", `import type { MeshStateReport } from "../wire/meshState";\nexport type Y = MeshStateReport;\n`)).to.deep.equal([]);
  });

  it("refuses production code importing tests, and allows imports down the layers", async () => {
    expect(await restrictedImports("node/core/example.ts", `import { h } from "../../test/node/core/helpers";\nexport const y = h;\n`)).to.have.length(1);
    expect(await restrictedImports("node/core/example.ts", `import { codec } from "../../protocol/codec";\nexport const y = codec;\n`)).to.deep.equal([]);
    expect(await restrictedImports("client/rest.ts", `import { verify } from "../protocol/verify";\nexport const y = verify;\n`)).to.deep.equal([]);
  });
});
