// The API reference page (/api/docs): renders the OpenAPI document with the vendored Swagger UI
// (static/vendor/swagger-ui-*). A file of its own, because the CSP allows no inline script.
(function () {
  "use strict";
  function start() {
    var el = document.getElementById("api-reference");
    if (!el || typeof window.SwaggerUIBundle !== "function") return;
    window.SwaggerUIBundle({
      url: el.dataset.specUrl,
      domNode: el,
      deepLinking: true,
      // Never ask an outside validator about the spec: the page talks to this server only.
      validatorUrl: null,
      // The token typed into "Authorize" lives in this tab only.
      persistAuthorization: false,
      tryItOutEnabled: false,
      docExpansion: "list",
      defaultModelsExpandDepth: 0
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
