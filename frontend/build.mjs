// Bundle each page's entry point in src/ into dist/ (no CDN: everything is served by the platform).
import { build } from "esbuild";
import { readdirSync } from "node:fs";

const entryPoints = readdirSync("src").filter((name) => name.endsWith(".js") && !name.startsWith("_")).map((name) => `src/${name}`);
await build({ entryPoints, outdir: "dist", bundle: true, format: "esm", minify: true, sourcemap: true, target: ["chrome110", "firefox110", "safari16"], logLevel: "info" });
