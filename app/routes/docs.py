"""OpenAPI docs that work offline and under the strict CSP.

FastAPI's default /docs page loads Swagger UI from a CDN and starts it with
an inline script; this one loads the assets from this server and starts it
from a small external script.
"""

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from ..templating import templates

router = APIRouter(include_in_schema=False)

DOCS_INIT_JS = """\
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: document.body.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
"""


@router.get("/docs", response_class=HTMLResponse)
async def docs(request: Request) -> HTMLResponse:
    css = request.url_for("swagger_asset", name="swagger-ui.css").path
    js = request.url_for("swagger_asset", name="swagger-ui-bundle.js").path
    icon = request.url_for("swagger_asset", name="favicon-32x32.png").path
    init = request.url_for("docs_init").path
    openapi = request.app.openapi_url
    context = {"page": "docs", "css": css, "js": js, "icon": icon, "init": init, "openapi": openapi}
    return templates.TemplateResponse(request, "docs.html", context)


@router.get("/docs/init.js", name="docs_init")
async def docs_init() -> Response:
    return Response(DOCS_INIT_JS, media_type="text/javascript")
