// Declarations for imports that esbuild resolves but TypeScript does not
// know: a stylesheet import bundles the file into the CSS output.
declare module "*.css";
