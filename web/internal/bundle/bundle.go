// Package bundle builds the web client: it runs esbuild (through its Go
// API, so no Node is needed) over web/src and returns the files that go
// into web/dist — the hashed JavaScript and CSS bundles, their source
// maps and an index.html that references them.
//
// The same function serves the generator (`go generate ./web`), which
// writes the files, and the test that fails when the committed bundle is
// stale, which builds in memory and compares.
package bundle

import (
	"bytes"
	"fmt"
	"html/template"
	"path/filepath"
	"slices"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// PreactVersion is the version of the vendored Preact in web/vendor/preact.
const PreactVersion = "11.2.0"

// File is one output file, named relative to web/dist with forward
// slashes (for example "assets/main-5X2QH6IK.js").
type File struct {
	Name     string
	Contents []byte
}

// Build bundles the web client whose sources live in webDir (the web/
// directory of the repository) and returns every file of web/dist,
// sorted by name. It reads nothing outside webDir and needs no network.
func Build(webDir string) ([]File, error) {
	webDir, err := filepath.Abs(webDir)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	outDir := filepath.Join(webDir, "dist")
	res := api.Build(api.BuildOptions{
		AbsWorkingDir:     webDir,
		EntryPoints:       []string{"src/main.tsx"},
		Bundle:            true,
		Write:             false,
		Outdir:            outDir,
		EntryNames:        "assets/[name]-[hash]",
		AssetNames:        "assets/[name]-[hash]",
		Format:            api.FormatESModule,
		Platform:          api.PlatformBrowser,
		Target:            api.ES2020,
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		Sourcemap:         api.SourceMapLinked,
		SourcesContent:    api.SourcesContentInclude,
		JSX:               api.JSXTransform,
		JSXFactory:        "h",
		JSXFragment:       "Fragment",
		Charset:           api.CharsetUTF8,
		LegalComments:     api.LegalCommentsNone,
		Banner: map[string]string{
			"js": "/*! Concord web client. Includes Preact " + PreactVersion +
				" (c) 2015-present Jason Miller, MIT License. */",
		},
		Plugins:  []api.Plugin{vendored(webDir)},
		LogLevel: api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		msgs := api.FormatMessages(res.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return nil, fmt.Errorf("bundle: esbuild failed:\n%s", strings.Join(msgs, ""))
	}
	var files []File
	var js, css string
	for _, f := range res.OutputFiles {
		rel, err := filepath.Rel(outDir, f.Path)
		if err != nil {
			return nil, fmt.Errorf("bundle: output %s: %w", f.Path, err)
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(rel, ".js"):
			js = rel
		case strings.HasSuffix(rel, ".css"):
			css = rel
		}
		files = append(files, File{Name: rel, Contents: f.Contents})
	}
	if js == "" || css == "" {
		return nil, fmt.Errorf("bundle: esbuild produced no JavaScript or no CSS bundle")
	}
	boot, err := buildBoot(webDir)
	if err != nil {
		return nil, err
	}
	index, err := indexHTML(js, css, boot)
	if err != nil {
		return nil, err
	}
	files = append(files, File{Name: "index.html", Contents: index})
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// vendored resolves the bare imports the sources use to the committed
// copies in web/vendor, so that no node_modules directory is needed.
func vendored(webDir string) api.Plugin {
	paths := map[string]string{
		"preact":       filepath.Join(webDir, "vendor", "preact", "preact.mjs"),
		"preact/hooks": filepath.Join(webDir, "vendor", "preact", "hooks.mjs"),
	}
	return api.Plugin{
		Name: "vendored",
		Setup: func(b api.PluginBuild) {
			b.OnResolve(api.OnResolveOptions{Filter: `^[^./]`}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
				p, ok := paths[a.Path]
				if !ok {
					return api.OnResolveResult{}, fmt.Errorf("import %q is not vendored in web/vendor", a.Path)
				}
				return api.OnResolveResult{Path: p}, nil
			})
		},
	}
}

// buildBoot bundles src/boot.ts, the script inlined into index.html, into
// one minified function expression with no source map (it is a few
// hundred bytes).
func buildBoot(webDir string) (string, error) {
	res := api.Build(api.BuildOptions{
		AbsWorkingDir:     webDir,
		EntryPoints:       []string{"src/boot.ts"},
		Bundle:            true,
		Write:             false,
		Format:            api.FormatIIFE,
		Platform:          api.PlatformBrowser,
		Target:            api.ES2020,
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		Charset:           api.CharsetUTF8,
		LegalComments:     api.LegalCommentsNone,
		LogLevel:          api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		msgs := api.FormatMessages(res.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return "", fmt.Errorf("bundle: esbuild failed on src/boot.ts:\n%s", strings.Join(msgs, ""))
	}
	if len(res.OutputFiles) != 1 {
		return "", fmt.Errorf("bundle: src/boot.ts built into %d files, want 1", len(res.OutputFiles))
	}
	code := strings.TrimSpace(string(res.OutputFiles[0].Contents))
	// Inline, the script ends at the first "</script" whatever the
	// JavaScript means; "<!--" changes how the parser reads it.
	if l := strings.ToLower(code); strings.Contains(l, "</script") || strings.Contains(l, "<!--") {
		return "", fmt.Errorf("bundle: src/boot.ts contains </script or <!--, which cannot be inlined")
	}
	return code, nil
}

// The boot script comes first: an inline script after a stylesheet would
// wait for the stylesheet. Its hash is in the Content-Security-Policy
// (web.Handler computes it from this file); it is the only inline code.
var indexTemplate = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Concord</title>
<script>{{.Boot}}</script>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/{{.CSS}}">
<script type="module" src="/{{.JS}}"></script>
</head>
<body>
<div id="app"></div>
<noscript>Concord's web client needs JavaScript.</noscript>
</body>
</html>
`))

// indexHTML is the page that loads the bundles. Its one inline script is
// the boot script; there is no inline style, so the
// Content-Security-Policy forbids both but for that script's hash.
func indexHTML(js, css, boot string) ([]byte, error) {
	var b bytes.Buffer
	data := struct {
		JS, CSS string
		Boot    template.JS
	}{js, css, template.JS(boot)}
	if err := indexTemplate.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("bundle: index.html: %w", err)
	}
	return b.Bytes(), nil
}

// BuildTest bundles one test entry point of webDir (for example
// "test/unit.test.ts") into a single unminified ES module for a browser
// to run; the tests in web/ load it in Chromium.
func BuildTest(webDir, entry string) ([]byte, error) {
	webDir, err := filepath.Abs(webDir)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	res := api.Build(api.BuildOptions{
		AbsWorkingDir: webDir,
		EntryPoints:   []string{entry},
		Bundle:        true,
		Write:         false,
		Outfile:       filepath.Join(webDir, "test-out", "test.js"),
		Format:        api.FormatESModule,
		Platform:      api.PlatformBrowser,
		Target:        api.ES2020,
		JSX:           api.JSXTransform,
		JSXFactory:    "h",
		JSXFragment:   "Fragment",
		Loader:        map[string]api.Loader{".css": api.LoaderEmpty},
		Plugins:       []api.Plugin{vendored(webDir)},
		LogLevel:      api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		msgs := api.FormatMessages(res.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return nil, fmt.Errorf("bundle: esbuild failed:\n%s", strings.Join(msgs, ""))
	}
	for _, f := range res.OutputFiles {
		if strings.HasSuffix(f.Path, ".js") {
			return f.Contents, nil
		}
	}
	return nil, fmt.Errorf("bundle: no JavaScript output for %s", entry)
}
