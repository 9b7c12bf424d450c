/**
 * The runtime import graph of a TypeScript entry, read statically: relative imports are followed through the
 * repository's TypeScript sources, package imports through the files Node resolves them to (their JavaScript, all
 * the way down). What the compiler erases (`import type`, `export type`, imports of types only) is not followed.
 * Each module reached records the chain that reached it, so a finding names how the entry got there.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire, isBuiltin } from "node:module";
import { dirname, extname, relative, resolve } from "node:path";
import ts from "typescript";

/** A module the graph reached: a file, or a Node built-in (`node:https`, `fs`). */
export interface ReachedModule {
  /** A file path relative to `root`, or the built-in's specifier. */
  id: string;
  builtin: boolean;
  /** The package that holds the file (`ws`, `@grpc/grpc-js`), null for the repository's own files and built-ins. */
  packageName: string | null;
  /** A package specifier Node cannot resolve here (an optional dependency a package requires inside a try). */
  unresolved: boolean;
  /** The modules from the entry to this one, both included. */
  chain: string[];
}

/** The module specifiers a source file loads at run time. */
export function runtimeSpecifiers(fileName: string, text: string): string[] {
  const kind = /\.[cm]?js$/.test(fileName) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.ES2022, false, kind);
  const specifiers: string[] = [];
  const onlyTypes = (elements: ts.NodeArray<ts.ImportSpecifier | ts.ExportSpecifier>): boolean =>
    elements.length > 0 && elements.every((element) => element.isTypeOnly);
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const erased =
        clause !== undefined &&
        (clause.isTypeOnly || (clause.name === undefined && clause.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings) && onlyTypes(clause.namedBindings.elements)));
      if (!erased) specifiers.push(node.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      const erased = node.isTypeOnly || (node.exportClause !== undefined && ts.isNamedExports(node.exportClause) && onlyTypes(node.exportClause.elements));
      if (!erased) specifiers.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && !node.isTypeOnly && ts.isExternalModuleReference(node.moduleReference)) {
      if (ts.isStringLiteral(node.moduleReference.expression)) specifiers.push(node.moduleReference.expression.text);
    } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0]!)) {
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === "require";
      if (isRequire || node.expression.kind === ts.SyntaxKind.ImportKeyword) specifiers.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specifiers;
}

/** The package of a file under node_modules (the last node_modules segment wins), else null. */
function packageOf(file: string): string | null {
  const parts = file.split(/[\\/]/);
  const at = parts.lastIndexOf("node_modules");
  if (at < 0) return null;
  const first = parts[at + 1] ?? "";
  return first.startsWith("@") ? `${first}/${parts[at + 2] ?? ""}` : first;
}

/** A relative import of a repository TypeScript file: x.ts or x/index.ts. */
function resolveTypeScript(fromFile: string, specifier: string): string {
  const base = resolve(dirname(fromFile), specifier);
  for (const candidate of [`${base}.ts`, resolve(base, "index.ts"), base]) {
    if (existsSync(candidate) && extname(candidate) !== "") return candidate;
  }
  throw new Error(`${fromFile}: cannot resolve ${specifier}`);
}

/** The file a specifier loads; null for a package that is not installed (the repository's own imports must resolve). */
function resolveSpecifier(fromFile: string, specifier: string): string | null {
  const inRepositorySource = fromFile.endsWith(".ts") && packageOf(fromFile) === null;
  if (inRepositorySource && specifier.startsWith(".")) return resolveTypeScript(fromFile, specifier);
  try {
    return createRequire(fromFile).resolve(specifier);
  } catch (error) {
    if ((error as { code?: unknown }).code === "MODULE_NOT_FOUND" && !inRepositorySource) return null;
    throw error;
  }
}

/** Every module the entry loads at run time, each once, with the first chain that reached it. */
export function importGraph(entryFile: string, root: string): ReachedModule[] {
  const reached = new Map<string, ReachedModule>();
  const queue: { file: string; chain: string[] }[] = [{ file: entryFile, chain: [relative(root, entryFile)] }];
  reached.set(entryFile, { id: relative(root, entryFile), builtin: false, packageName: null, unresolved: false, chain: queue[0]!.chain });
  while (queue.length > 0) {
    const { file, chain } = queue.shift()!;
    if (!/\.([cm]?js|ts)$/.test(file)) continue; // JSON and native addons (.node) load nothing further
    for (const specifier of runtimeSpecifiers(file, readFileSync(file, "utf8"))) {
      if (isBuiltin(specifier)) {
        if (!reached.has(specifier)) reached.set(specifier, { id: specifier, builtin: true, packageName: null, unresolved: false, chain: [...chain, specifier] });
        continue;
      }
      const target = resolveSpecifier(file, specifier);
      if (target === null) {
        const id = `${specifier} (not installed)`;
        if (!reached.has(id)) reached.set(id, { id, builtin: false, packageName: specifier, unresolved: true, chain: [...chain, id] });
        continue;
      }
      if (reached.has(target)) continue;
      const id = relative(root, target);
      const entry = { id, builtin: false, packageName: packageOf(target), unresolved: false, chain: [...chain, id] };
      reached.set(target, entry);
      queue.push({ file: target, chain: entry.chain });
    }
  }
  return [...reached.values()];
}
