// The overview's optional refresh; everything else works without script.
(function () {
  var box = document.getElementById("autorefresh");
  if (!box) return;
  box.checked = sessionStorage.getItem("seqby-refresh") === "1";
  var timer = null;
  function arm() {
    if (timer) clearTimeout(timer);
    timer = box.checked ? setTimeout(function () { location.reload(); }, 10000) : null;
  }
  box.addEventListener("change", function () {
    sessionStorage.setItem("seqby-refresh", box.checked ? "1" : "0");
    arm();
  });
  arm();
})();
