import { mkdtemp, rm, stat, chmod, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { expect } from "chai";
import {
  AuthError,
  KEY_FILES,
  NodeKey,
  createDevIdentity,
  loadKeyDir,
  p256PrivateScalar,
  saveKeyDir,
  type DevIdentity,
} from "../../protocol";

describe("keystore", () => {
  let dir: string;
  let dev: DevIdentity;

  before(async () => {
    dev = await createDevIdentity();
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "ats-keys-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("saves and loads a key directory (plain dev form), with every file mode 0600", async () => {
    const summary = await saveKeyDir(dir, dev);
    expect(summary).to.deep.equal({
      cardId: dev.cardId,
      cardPublicKey: dev.cardPublicKey,
      nodeAddress: dev.nodeAddress,
      certificateChainPem: dev.certificateChainPem,
    });
    for (const file of Object.values(KEY_FILES)) {
      expect(((await stat(join(dir, file))).mode & 0o777).toString(8), file).to.equal("600");
    }
    const loaded = await loadKeyDir(dir);
    expect(loaded.cardId).to.equal(dev.cardId);
    expect(loaded.nodeAddress).to.equal(dev.nodeAddress);
    expect(loaded.nodeKey.exportPrivateKey()).to.equal(dev.nodeKey.exportPrivateKey());
    expect(p256PrivateScalar(loaded.cardKey)).to.equal(p256PrivateScalar(dev.cardKey));
    expect(loaded.certificateChainPem.map((p) => p.trim())).to.deep.equal(dev.certificateChainPem.map((p) => p.trim()));
    expect(loaded.ca?.certificatePem.trim()).to.equal(dev.ca.certificatePem.trim());
  });

  it("encrypts the node key as a V3 keystore with a password and refuses a wrong one", async () => {
    await saveKeyDir(dir, dev, { password: "correct horse", scryptN: 1 << 10 });
    const text = await readFile(join(dir, KEY_FILES.nodeKeystore), "utf8");
    expect(text).to.not.contain(dev.nodeKey.exportPrivateKey().slice(2));
    expect(JSON.parse(text)).to.include({ version: 3 });
    expect((await loadKeyDir(dir, { password: "correct horse" })).nodeAddress).to.equal(dev.nodeAddress);
    let caught: unknown;
    try {
      await loadKeyDir(dir, { password: "wrong" });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(AuthError);
  });

  it("refuses key files readable by others", async () => {
    await saveKeyDir(dir, dev);
    await chmod(join(dir, KEY_FILES.cardKey), 0o644);
    let caught: unknown;
    try {
      await loadKeyDir(dir);
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(AuthError);
  });

  it("never reveals private keys through JSON.stringify, util.inspect or string conversion", async () => {
    await saveKeyDir(dir, dev);
    const loaded = await loadKeyDir(dir);
    const secrets = [
      dev.nodeKey.exportPrivateKey().slice(2),
      p256PrivateScalar(dev.cardKey).slice(2),
      p256PrivateScalar(dev.ca.privateKey).slice(2),
    ];
    const renderings = [
      JSON.stringify(dev),
      JSON.stringify(loaded),
      inspect(dev, { depth: 10, showHidden: true }),
      inspect(loaded, { depth: 10, showHidden: true }),
      String(dev.nodeKey),
      `${dev.nodeKey}`,
      JSON.stringify(NodeKey.fromPrivateKey(dev.nodeKey.exportPrivateKey())),
    ];
    for (const text of renderings) {
      for (const secret of secrets) expect(text.toLowerCase()).to.not.contain(secret);
      expect(text).to.not.contain("PRIVATE KEY");
    }
    expect(JSON.stringify(dev.nodeKey)).to.equal(JSON.stringify({ address: dev.nodeAddress }));
  });
});
