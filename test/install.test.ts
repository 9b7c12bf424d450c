/**
 * What `npm install` on a fresh clone does (docs/install.md): no package in the lockfile refuses the Node.js versions
 * package.json promises (npm would print EBADENGINE), and every package that runs an install script was reviewed in
 * package.json's `allowScripts` and is explained in docs/install.md.
 */
import { expect } from "chai";
import Fastify from "fastify";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";

const ROOT = join(__dirname, "..");

interface LockedPackage {
  version?: string;
  engines?: { node?: string } | string[];
  hasInstallScript?: boolean;
}

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string }; allowScripts?: Record<string, boolean> };
const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockedPackage> };

/** The package name of a lockfile key: `node_modules/a/node_modules/@s/b` → `@s/b`. */
function nameOf(key: string): string {
  return key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length);
}

describe("npm install: what a fresh clone installs", () => {
  it("locks no package whose engines refuse the oldest Node.js that package.json promises (no EBADENGINE)", () => {
    const oldest = semver.minVersion(pkg.engines.node);
    expect(oldest, `package.json engines.node ${pkg.engines.node}`).to.not.equal(null);
    const refusing = Object.entries(lock.packages)
      .filter(([key]) => key !== "")
      .flatMap(([key, locked]) => {
        const range = Array.isArray(locked.engines) ? undefined : locked.engines?.node;
        return range !== undefined && !semver.satisfies(oldest!, range) ? [`${nameOf(key)}@${locked.version ?? "?"} wants node ${range}`] : [];
      });
    expect(refusing, `packages refusing Node.js ${oldest!.version}`).to.deep.equal([]);
  });

  it("reviews every package with an install script in allowScripts, and docs/install.md explains each", () => {
    const withScripts = [...new Set(Object.entries(lock.packages).filter(([key, locked]) => key !== "" && locked.hasInstallScript === true).map(([key]) => nameOf(key)))].sort();
    expect(withScripts.length, "packages with install scripts in the lockfile").to.be.greaterThan(0);
    const reviewed = Object.keys(pkg.allowScripts ?? {}).sort();
    expect(reviewed, "package.json allowScripts (npm install-scripts approve|deny <pkg>)").to.deep.equal(withScripts);
    const doc = readFileSync(join(ROOT, "docs", "install.md"), "utf8");
    const explained = [...doc.matchAll(/^\| `([^`]+)`/gm)].map((match) => match[1]!);
    expect(withScripts.filter((name) => !explained.includes(name)), "packages docs/install.md's table does not explain").to.deep.equal([]);
  });

  it("fastify's inject (light-my-request, with cookie overridden to 1.x for Node 20) still sends request cookies", async () => {
    const app = Fastify();
    app.get("/", async (request) => ({ cookie: request.headers.cookie ?? null }));
    try {
      const answer = await app.inject({ method: "GET", url: "/", cookies: { session: "a b", theme: "dark" } });
      expect(answer.json()).to.deep.equal({ cookie: "session=a%20b; theme=dark" });
    } finally {
      await app.close();
    }
  });
});
