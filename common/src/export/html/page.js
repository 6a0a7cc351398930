// Clicking a system in a chart's legend fades every other system's marks in that chart;
// clicking it again shows them all.
document.querySelectorAll("svg [data-legend]").forEach(function (entry) {
  entry.addEventListener("click", function () {
    var name = entry.getAttribute("data-legend");
    var chart = entry.closest("svg");
    var focus = chart.getAttribute("data-focus") === name ? "" : name;
    chart.setAttribute("data-focus", focus);
    chart.querySelectorAll("[data-system]").forEach(function (mark) {
      mark.classList.toggle("dim", focus !== "" && mark.getAttribute("data-system") !== focus);
    });
  });
});
