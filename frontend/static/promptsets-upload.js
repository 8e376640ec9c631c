// Upload progress for the promptset form: the same POST the form makes, sent with
// XMLHttpRequest so that its upload progress events can move a progress bar.
// Without JavaScript the form still posts normally.
(function () {
  "use strict";

  function megabytes(bytes) { return (bytes / (1024 * 1024)).toFixed(1) + " MB"; }

  function sameAddress(a, b) { return a.split("#")[0] === b.split("#")[0]; }

  function attach() {
    var form = document.getElementById("promptset-upload-form");
    if (!form) { return; }
    var progress = document.getElementById("upload-progress");
    var status = document.getElementById("upload-status");
    var button = form.querySelector("button[type=submit]");
    var target = form.action || window.location.href;

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var request = new XMLHttpRequest();
      request.open("POST", target);
      progress.hidden = false;
      progress.value = 0;
      button.disabled = true;

      request.upload.addEventListener("progress", function (progressEvent) {
        if (progressEvent.lengthComputable) {
          progress.max = progressEvent.total;
          progress.value = progressEvent.loaded;
          status.textContent = "Uploading: " + Math.floor(100 * progressEvent.loaded / progressEvent.total) + "% (" +
            megabytes(progressEvent.loaded) + " of " + megabytes(progressEvent.total) + ")";
        } else {
          status.textContent = "Uploading: " + megabytes(progressEvent.loaded);
        }
      });
      request.upload.addEventListener("load", function () {
        progress.removeAttribute("value");  // indeterminate while the server validates every row
        status.textContent = "Uploaded. Validating every row…";
      });
      request.addEventListener("load", function () {
        if (request.responseURL && !sameAddress(request.responseURL, target)) {
          window.location.assign(request.responseURL);  // success: redirected to the new promptset
          return;
        }
        // The form again, with its errors or the rejected rows: show that page's <main>.
        var fresh = new DOMParser().parseFromString(request.responseText, "text/html").querySelector("main");
        var current = document.querySelector("main");
        if (fresh && current) {
          current.replaceWith(fresh);
          window.scrollTo(0, 0);
          attach();
        } else {
          button.disabled = false;
          status.textContent = "The server answered " + request.status + " without a page; nothing was stored.";
        }
      });
      request.addEventListener("error", function () {
        button.disabled = false;
        progress.hidden = true;
        status.textContent = "The upload failed: the connection broke or the server did not answer. Nothing was stored; try again.";
      });
      request.send(new FormData(form));
    });
  }

  // The page of an upload being checked: follow the worker until the upload is imported or rejected,
  // then reload (the server sends an imported upload on to its promptset).
  function follow() {
    var check = document.getElementById("upload-check");
    if (!check) { return; }
    var state = document.getElementById("upload-state");
    var bar = document.getElementById("upload-check-progress");
    function poll() {
      fetch(check.dataset.statusUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
        .then(function (upload) {
          if (upload.is_finished) { window.location.reload(); return; }
          // The words of upload_status.html, which draws the same line on the server.
          state.textContent = upload.state_label + (upload.rows_read ? " (" + upload.rows_read.toLocaleString() + (upload.rows_read === 1 ? " row" : " rows") + " read)" : "") + ".";
          if (upload.bytes_total) { bar.max = upload.bytes_total; bar.value = upload.bytes_read; }
          window.setTimeout(poll, 1000);
        })
        .catch(function () { window.setTimeout(poll, 3000); });
    }
    window.setTimeout(poll, 500);
  }

  attach();
  follow();
})();
