(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var table = document.getElementById("sample-table");
  var select = document.getElementById("metric");
  var filter = document.getElementById("filter");
  var problem = document.getElementById("problem");
  var count = document.getElementById("count");
  var more = document.getElementById("more");
  var ex = data.explain;
  var sortColumn = 0, sortDirection = 1, openIndex = null, limit = data.maxRows;

  function columns() {
    var names = ["id"];
    if (data.key) names.push(data.key);
    names = names.concat(data.systems);
    if (data.systems.length > 1) names.push("\u0394");
    if (data.verdicts) names.push("diagnosis");
    return names;
  }

  function rows() {
    var scores = data.scores[select.value];
    return data.ids.map(function (id, i) {
      var row = [id];
      if (data.key) row.push(data.strata[i]);
      var values = scores.map(function (column) { return column[i]; });
      row = row.concat(values);
      if (values.length > 1) {
        var first = values[0], last = values[values.length - 1];
        row.push(first === null || last === null ? null : last - first);
      }
      if (data.verdicts) {
        row.push(data.verdicts.map(function (column) { return column[i] || "NA"; }).join(" \u2192 "));
      }
      row.index = i;
      return row;
    });
  }

  function shows(row) {
    var wanted = problem ? problem.value : "";
    if (!wanted) return true;
    if (wanted === "regressed") {
      var delta = row[data.systems.length + (data.key ? 1 : 0) + 1];
      return delta !== null && (data.better[select.value] ? delta < 0 : delta > 0);
    }
    return data.verdicts.some(function (column) { return column[row.index] === wanted; });
  }

  function format(value, column) {
    if (value === null) return "NA";
    if (typeof value !== "number") return String(value);
    var text = value.toFixed(4);
    return column === "\u0394" && value > 0 ? "+" + text : text;
  }

  function compare(a, b) {
    if (a === b) return 0;
    if (a === null) return 1;
    if (b === null) return -1;
    if (typeof a === "number" && typeof b === "number") return sortDirection * (a - b);
    return sortDirection * String(a).localeCompare(String(b), undefined, {numeric: true});
  }

  function node(tag, className, text) {
    var element = document.createElement(tag);
    if (className) element.className = className;
    if (text !== undefined) element.textContent = text;
    return element;
  }

  function label(value) { return value === null || value === undefined ? "-" : String(value); }

  function tableOf(className, header, body) {
    var t = node("table", className), head = node("tr");
    header.forEach(function (text) { head.appendChild(node("th", null, text)); });
    t.appendChild(node("thead")).appendChild(head);
    var tbody = t.appendChild(node("tbody"));
    body.forEach(function (cells) {
      var tr = tbody.appendChild(node("tr", cells.className));
      cells.forEach(function (text) { tr.appendChild(node("td", null, text)); });
    });
    return t;
  }

  function slotIds(view) { return view ? view[4].map(function (slot) { return slot[0]; }) : []; }

  function explanation(index) {
    var box = node("div", "explain");
    box.appendChild(node("p", "question", data.ids[index] + ": " + (ex.questions[index] || "")));
    var views = ex.views.map(function (system) { return system[index]; });
    var kinds = [2, 3, 4].filter(function (k) {
      return views.some(function (v) {
        return v && v[4].concat(k < 4 ? v[5] : []).some(function (entry) { return entry[k] != null; });
      });
    });
    var heads = {2: "rel", 3: "grade", 4: "utility"};
    var base = slotIds(views[0]);
    var systems = box.appendChild(node("div", "systems"));
    views.forEach(function (view, s) {
      var column = systems.appendChild(node("div", "system"));
      column.appendChild(node("h4", null, data.systems[s]));
      if (!view) { column.appendChild(node("p", "note", "not in these results")); return; }
      var pool = view[2] === null ? "the ranking is the pool" : "pool of " + view[2];
      column.appendChild(node("p", "note", "top " + view[0] + " of " + view[1] + " retrieved, " + pool));
      if (view[7]) column.appendChild(node("p", "note", "the system failed: " + view[7] + " (NA, an error row)"));
      else if (!view[3]) column.appendChild(node("p", "note", "no output: scored as an empty ranking"));
      var mine = slotIds(view);
      var body = view[4].map(function (slot, rank) {
        var cells = [String(rank + 1), ex.docs[slot[0]]];
        kinds.forEach(function (k) { cells.push(label(slot[k])); });
        cells.push(label(slot[1]), ex.texts[slot[0]] || "-");
        if (s > 0 && base.indexOf(slot[0]) < 0) cells.className = "moved-in";
        return cells;
      });
      var header = ["rank", "id"].concat(kinds.map(function (k) { return heads[k]; }), ["pool", "text"]);
      if (body.length) column.appendChild(tableOf("slots", header, body));
      var missed = view[5].map(function (m) {
        var labels = [[2, "rel"], [3, "grade"]].filter(function (p) { return m[p[0]] != null; })
          .map(function (p) { return p[1] + " " + m[p[0]]; }).join(", ");
        return ex.docs[m[0]] + " (" + labels + ") " + (m[1] == null ? "not in the pool" : "at pool rank " + m[1]);
      });
      column.appendChild(node("p", "missed", "missed: " + (missed.join("; ") || "none")));
      if (s > 0) {
        var names = function (list) { return list.map(function (d) { return ex.docs[d]; }).join(", ") || "none"; };
        var moved = "vs " + data.systems[0] + ": moved in " + names(mine.filter(function (d) { return base.indexOf(d) < 0; })) +
          "; moved out " + names(base.filter(function (d) { return mine.indexOf(d) < 0; }));
        column.appendChild(node("p", "moved", moved));
      }
      var d = view[6];
      if (d) {
        column.appendChild(node("p", "verdict " + (d[4] || "na"), d[0] + ": " + (d[4] || "NA") +
          " (G_obs " + d[1] + ", G_pool " + d[2] + ", G_oracle " + d[3] + ")"));
      }
      (view[8] || []).forEach(function (line) { column.appendChild(node("p", "hop", line)); });
    });
    var several = data.systems.length > 1;
    var scoreRows = ex.labels.map(function (name) {
      var values = data.scores[name].map(function (system) { return system[index]; });
      var cells = [name].concat(values.map(function (v) { return format(v); }));
      if (several) {
        var first = values[0], last = values[values.length - 1];
        cells.push(first === null || last === null ? "NA" : format(last - first, "\u0394"));
      }
      return cells;
    });
    box.appendChild(tableOf("scores", ["scores"].concat(data.systems, several ? ["\u0394"] : []), scoreRows));
    return box;
  }

  // The view of the open sample under its row; the table's box grows to hold the row
  // and the whole view when they are taller than it, so that nothing of it is cut off.
  function openRow(tr, width) {
    var detail = node("tr", "explain-row");
    var cell = detail.appendChild(node("td"));
    cell.colSpan = width;
    cell.appendChild(explanation(openIndex));
    tr.after(detail);
    var box = table.parentElement;
    box.style.maxHeight = "";
    var needed = table.tHead.offsetHeight + tr.offsetHeight + detail.offsetHeight + 2;
    if (needed > parseFloat(getComputedStyle(box).maxHeight)) box.style.maxHeight = needed + "px";
  }

  // The opened sample's row at the top of the box, and the box in the window.
  function reveal(tr) {
    var box = table.parentElement;
    box.scrollTop = tr.offsetTop - table.tHead.offsetHeight;
    var rect = box.getBoundingClientRect();
    if (rect.top < 0 || rect.bottom > window.innerHeight) {
      box.scrollIntoView({block: rect.height > window.innerHeight ? "start" : "nearest"});
    }
  }

  function render() {
    var names = columns();
    var first = data.key ? 2 : 1;  // the columns of numbers: each system's, then the difference
    var scored = [first, first + data.systems.length + (data.systems.length > 1 ? 1 : 0)];
    var head = document.createElement("tr");
    names.forEach(function (name, index) {
      var th = document.createElement("th");
      th.textContent = name;
      if (index >= scored[0] && index < scored[1]) th.className = "num";
      th.setAttribute("data-column", String(index));
      if (index === sortColumn) th.setAttribute("aria-sort", sortDirection > 0 ? "ascending" : "descending");
      th.addEventListener("click", function () {
        sortDirection = sortColumn === index ? -sortDirection : 1;
        sortColumn = index;
        render();
      });
      head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    var needle = filter.value.trim().toLowerCase();
    var shown = rows().filter(function (row) {
      if (!shows(row)) return false;
      if (!needle) return true;
      return String(row[0]).toLowerCase().indexOf(needle) >= 0 ||
        (data.key && String(row[1]).toLowerCase().indexOf(needle) >= 0);
    });
    shown.sort(function (a, b) {
      var order = compare(a[sortColumn], b[sortColumn]);
      return order !== 0 ? order : String(a[0]).localeCompare(String(b[0]), undefined, {numeric: true});
    });
    var body = document.createDocumentFragment(), open = null;
    var drawn = shown.slice(0, limit);
    drawn.forEach(function (row) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-index", String(row.index));
      if (ex) tr.className = "explainable";
      row.forEach(function (value, index) {
        var td = document.createElement("td");
        td.textContent = format(value, names[index]);
        if (typeof value === "number" || value === null) td.className = "num";
        if (names[index] === "\u0394" && value) td.className += value > 0 ? " pos" : " neg";
        tr.appendChild(td);
      });
      if (row.index === openIndex) open = tr;
      body.appendChild(tr);
    });
    table.tBodies[0].replaceChildren(body);
    if (open) openRow(open, names.length);
    count.textContent = shown.length + " of " + data.ids.length + " samples" +
      (drawn.length < shown.length ? " (the first " + drawn.length + " drawn)" : "");
    more.hidden = drawn.length === shown.length;
  }

  if (ex) {
    table.tBodies[0].addEventListener("click", function (event) {
      var tr = event.target.closest("tr.explainable");
      if (!tr) return;
      var index = Number(tr.getAttribute("data-index"));
      var previous = table.querySelector("tr.explain-row");
      if (previous) previous.remove();
      table.parentElement.style.maxHeight = "";
      openIndex = openIndex === index ? null : index;
      if (openIndex !== null) {
        openRow(tr, columns().length);
        reveal(tr);
      }
    });
  }
  select.addEventListener("change", render);
  filter.addEventListener("input", render);
  if (problem) problem.addEventListener("change", render);
  more.addEventListener("click", function () { limit = Infinity; render(); });
  render();
})();
