// The kernel editor of the stitchcuda-lab session panel: CodeMirror 6 as an anywidget module.
//
// Model traits (set from Python, stitchcuda_lab/jupyter/editor.py):
//   value        the text; every edit is sent back at once, so a button clicked right after
//                typing sees it
//   lang         "c" | "cuda" | "json"
//   original     the parent version's text ("" for none): the diff base
//   show_diff    show the diff against `original` inline (deleted lines above changed ones)
//   diagnostics  [{line, col, severity, message}]: compiler messages, 1-based kernel lines
//   focus_line   a 1-based line to scroll to the top when drawn (the kernel's entry, an error)
//   read_only, height (the most the editor grows to before it scrolls; "auto": no limit)
// Anything that goes wrong while building CodeMirror leaves a plain <textarea> bound to the
// same `value`, so the panel stays usable.

import { indentWithTab, defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { cpp } from "@codemirror/lang-cpp";
import { json, jsonParseLinter } from "@codemirror/lang-json";
import {
  bracketMatching, defaultHighlightStyle, foldGutter, indentOnInput, indentUnit,
  syntaxHighlighting,
} from "@codemirror/language";
import { lintGutter, linter, setDiagnostics } from "@codemirror/lint";
import { unifiedMergeView } from "@codemirror/merge";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { Compartment, EditorState } from "@codemirror/state";
import {
  EditorView, drawSelection, highlightActiveLine, highlightActiveLineGutter, keymap,
  lineNumbers,
} from "@codemirror/view";

const theme = EditorView.theme({
  "&": {
    fontSize: "12px",
    border: "1px solid var(--jp-border-color1, #d0d7de)",
    backgroundColor: "var(--jp-layout-color0, #ffffff)",
    color: "var(--jp-content-font-color1, #1f2328)",
  },
  ".cm-scroller": {
    fontFamily: "var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, Consolas, monospace)",
    lineHeight: "1.45",
  },
  ".cm-gutters": {
    backgroundColor: "var(--jp-layout-color2, #f6f8fa)",
    color: "var(--jp-ui-font-color2, #6e7781)",
    borderRight: "1px solid var(--jp-border-color2, #d0d7de)",
  },
  "&.cm-focused": { outline: "2px solid var(--jp-brand-color1, #2f6fdf)" },
});

function diagnosticsFor(doc, items) {
  const out = [];
  for (const d of items || []) {
    const n = Math.min(Math.max(1, d.line | 0), doc.lines);
    const line = doc.line(n);
    const col = Math.max(1, d.col | 0);
    const from = Math.min(line.from + col - 1, line.to);
    const severity = d.severity === "warning" ? "warning"
      : d.severity === "note" ? "info" : "error";
    out.push({ from, to: Math.max(from, line.to), severity, message: d.message || "",
               source: d.source || "compiler" });
  }
  return out;
}

function languageFor(lang) {
  if (lang === "json") return [json(), linter(jsonParseLinter(), { delay: 300 })];
  return [cpp()];
}

function fallback(model, el, why) {
  const ta = document.createElement("textarea");
  ta.className = "stitch-editor-fallback";
  ta.spellcheck = false;
  ta.setAttribute("autocorrect", "off");
  ta.setAttribute("autocapitalize", "off");
  ta.style.cssText = "width:100%;font-family:monospace;font-size:12px;white-space:pre;" +
    `height:${model.get("height") || "260px"}`;
  ta.value = model.get("value");
  ta.title = why ? `plain text editor (${why})` : "plain text editor";
  ta.addEventListener("input", () => { model.set("value", ta.value); model.save_changes(); });
  const sync = () => { if (ta.value !== model.get("value")) ta.value = model.get("value"); };
  model.on("change:value", sync);
  el.appendChild(ta);
  return () => model.off("change:value", sync);
}

function render({ model, el }) {
  el.classList.add("stitch-editor");
  let view;
  try {
    const langConf = new Compartment();
    const diffConf = new Compartment();
    const roConf = new Compartment();
    const diffExt = () => (model.get("show_diff") && model.get("original")
      ? unifiedMergeView({ original: model.get("original"), mergeControls: false,
                           highlightChanges: true, gutter: true })
      : []);
    const readOnly = () => [EditorState.readOnly.of(!!model.get("read_only")),
                            EditorView.editable.of(!model.get("read_only"))];
    let applying = false;   // a change that came from Python is not sent back
    view = new EditorView({
      parent: el,
      state: EditorState.create({
        doc: model.get("value"),
        extensions: [
          lineNumbers(), highlightActiveLineGutter(), foldGutter(), lintGutter(),
          history(), drawSelection(), highlightActiveLine(), indentOnInput(),
          bracketMatching(), highlightSelectionMatches(), indentUnit.of("    "),
          syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
          keymap.of([...defaultKeymap, ...historyKeymap, ...searchKeymap, indentWithTab]),
          EditorView.contentAttributes.of({ spellcheck: "false", autocorrect: "off",
                                            autocapitalize: "off", translate: "no" }),
          EditorView.theme({ "&": { maxHeight: model.get("height") === "auto" ? "none"
                                                 : (model.get("height") || "420px") },
                             ".cm-scroller": { overflow: "auto" } }),
          theme, langConf.of(languageFor(model.get("lang"))), diffConf.of(diffExt()),
          roConf.of(readOnly()),
          EditorView.updateListener.of((u) => {
            if (u.docChanged && !applying) {
              model.set("value", u.state.doc.toString());
              model.save_changes();
            }
          }),
        ],
      }),
    });
    const showDiagnostics = () => view.dispatch(
      setDiagnostics(view.state, diagnosticsFor(view.state.doc, model.get("diagnostics"))));
    const onValue = () => {
      const text = model.get("value");
      if (text === view.state.doc.toString()) return;
      applying = true;
      try {
        view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
      } finally {
        applying = false;
      }
      showDiagnostics();
    };
    const onDiff = () => view.dispatch({ effects: diffConf.reconfigure(diffExt()) });
    const onLang = () => view.dispatch({ effects: langConf.reconfigure(languageFor(model.get("lang"))) });
    const onRo = () => view.dispatch({ effects: roConf.reconfigure(readOnly()) });
    model.on("change:value", onValue);
    model.on("change:diagnostics", showDiagnostics);
    model.on("change:original", onDiff);
    model.on("change:show_diff", onDiff);
    model.on("change:lang", onLang);
    model.on("change:read_only", onRo);
    showDiagnostics();
    const focus = model.get("focus_line") | 0;
    if (focus > 0 && focus <= view.state.doc.lines) {
      const at = view.state.doc.line(focus).from;
      requestAnimationFrame(() => view.dispatch({
        effects: EditorView.scrollIntoView(at, { y: "start", yMargin: 4 }) }));
    }
    el.dataset.editor = "codemirror";
    return () => {
      model.off("change:value", onValue);
      model.off("change:diagnostics", showDiagnostics);
      model.off("change:original", onDiff);
      model.off("change:show_diff", onDiff);
      model.off("change:lang", onLang);
      model.off("change:read_only", onRo);
      view.destroy();
    };
  } catch (err) {
    if (view) view.destroy();
    el.textContent = "";
    el.dataset.editor = "textarea";
    return fallback(model, el, String(err && err.message || err));
  }
}

export default { render };
