import { mediaTypeOf } from "./media-type";

// The media type of a Content-Type as a browser extracts it (the Fetch Standard's examples among them).
describe("mediaTypeOf", () => {
  it.each([
    ["application/json; charset=utf-8", { type: "application/json", charset: "utf-8" }],
    ["Application/JSON", { type: "application/json" }],
    ['text/html;charset="Shift_JIS"', { type: "text/html", charset: "Shift_JIS" }],
    [["application/json", "application/json"], { type: "application/json" }],
    ["text/plain;charset=gbk, text/html", { type: "text/html" }],
    ["text/html;charset=gbk, text/html", { type: "text/html", charset: "gbk" }],
    ["text/html;charset=gbk;a=b, text/html;x=y", { type: "text/html", charset: "gbk" }],
    ["text/html, */*", { type: "text/html" }],
    ["text/html, text", { type: "text/html" }],
    ['text/plain; name="a,b", image/png', { type: "image/png" }],
    ['image/png, text/plain; name="a,b"', { type: "text/plain" }],
  ])("takes %j as %j", (header, media) => {
    expect(mediaTypeOf(header)).toEqual(media);
  });

  it.each([[undefined], [""], ["text"], ["*/*"], [", ,"], ["text/ plain"]])("finds none in %j", (header) => {
    expect(mediaTypeOf(header)).toBeNull();
  });
});
