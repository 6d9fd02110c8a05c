//! Images for the model: `read_image`, and `read` of a file whose content
//! is an image. The file is checked before it is read (a regular file, at
//! most [`MAX_IMAGE_BYTES`]), its header before it is decoded (at most
//! [`MAX_IMAGE_SIDE`] px a side and [`MAX_IMAGE_PIXELS`] pixels: the
//! attachment catalog's defaults), and decoding is bounded (`image`'s
//! [`image::Limits`]), runs off the async workers, and at most
//! [`NORMALIZING_AT_ONCE`] images are decoded at a time.
//!
//! What the model gets is normalized: an image within [`TARGET_EDGE`] px
//! a side and [`TARGET_BYTES`] is sent as it is; a larger one is scaled
//! down to fit [`TARGET_EDGE`] and re-encoded — as PNG (lossless: text and
//! screenshots stay legible) when that fits [`TARGET_BYTES`] and the source
//! is not a photo (JPEG), else as JPEG, quality lowered step by step until
//! it fits (the smallest is kept when none does). 2048 px is what vision
//! models look at — larger images are scaled down on the provider's side
//! anyway, so the extra pixels only cost request bytes — and 5 MB is the
//! smallest per-image limit of the common vision APIs (and what `read` used
//! to cap images at).

use std::io::{Cursor, Read};
use std::path::Path;

use dsh_protocol::tool::{ToolKind, ToolOutcome, ToolView};
use dsh_protocol::ErrorCode;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader};
use serde::Deserialize;

use super::disk::{blocking, open_regular, probe, Probe};
use super::location;
use crate::tools::display_path;

pub const READ_IMAGE_DESCRIPTION: &str = "Read a PNG, JPEG, WebP or GIF file and return the image itself. Paths without an extension are accepted too: the format is detected from the content, so normalized attachment paths can be passed directly, without copying or renaming. The harness validates and downscales supported large images before the next model request, so to look at an image use this tool directly; there is no need to install image libraries or create thumbnails. Independent files may be read concurrently in small batches. Requires the current model to accept image input.";

/// Largest image file accepted (encoded bytes).
pub(super) const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;
/// Largest width and height accepted.
const MAX_IMAGE_SIDE: u32 = 8192;
/// Largest width × height accepted.
const MAX_IMAGE_PIXELS: u64 = 64_000_000;
/// Most memory one decoding may allocate: the largest accepted image as
/// 8-bit RGBA, and some room.
const MAX_DECODE_ALLOC: u64 = MAX_IMAGE_PIXELS * 4 + 64 * 1024 * 1024;
/// The long edge the model gets at most.
const TARGET_EDGE: u32 = 2048;
/// The encoded bytes the model gets at most (when any quality fits).
const TARGET_BYTES: usize = 5 * 1000 * 1000;
/// JPEG qualities tried in turn.
const JPEG_LADDER: [u8; 5] = [90, 80, 70, 55, 40];
/// Images decoded at the same time (each may hold hundreds of MB).
const NORMALIZING_AT_ONCE: usize = 2;

static NORMALIZING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(NORMALIZING_AT_ONCE);

#[derive(Debug, Deserialize)]
pub struct ReadImageArgs {
    pub file_path: String,
}

pub fn present_read_image(path: &Path, cwd: &Path) -> ToolView {
    ToolView {
        title: format!("Read image {}", display_path(path, cwd)),
        kind: Some(ToolKind::Read),
        locations: vec![location(path, 1)],
        content: Vec::new(),
    }
}

pub async fn read_image(path: &Path) -> ToolOutcome {
    let owned = path.to_path_buf();
    let refuse = |message: String| ToolOutcome::failed(ErrorCode::InvalidToolArgs, message);
    match blocking(move || probe(&owned)).await {
        Err(message) => refuse(message),
        Ok(Probe::Missing) => refuse(format!("File not found: {}", path.display())),
        Ok(Probe::Directory) => refuse(format!(
            "{} is a directory, not an image file.",
            path.display()
        )),
        Ok(Probe::Text { size }) => refuse(format!(
            "{} is not an image: its content is text ({size} bytes). read_image reads PNG, JPEG, WebP and GIF files; use read for text.",
            path.display()
        )),
        Ok(Probe::Binary(what)) => refuse(format!(
            "{} is not a PNG, JPEG, WebP or GIF image (its content is {what}).",
            path.display()
        )),
        Ok(Probe::Image { what, size, .. }) => attach(path, what, size).await,
    }
}

/// Reads, checks and normalizes an image (`what`, `size` bytes: from
/// [`probe`]) and attaches it to the outcome: it follows the tool results
/// as a user message (image-capable models see it; others get a note
/// saying so).
pub(super) async fn attach(path: &Path, what: String, size: u64) -> ToolOutcome {
    use base64::Engine as _;
    if size > MAX_IMAGE_BYTES {
        return ToolOutcome::failed(
            ErrorCode::InvalidToolArgs,
            format!(
                "{} is an image ({what}) larger than the {} MiB limit; it was not read.",
                path.display(),
                MAX_IMAGE_BYTES >> 20
            ),
        );
    }
    let Ok(_permit) = NORMALIZING.acquire().await else {
        return ToolOutcome::failed(ErrorCode::Internal, "dsh is shutting down");
    };
    let owned = path.to_path_buf();
    let normalized = blocking(move || {
        let mut bytes = Vec::new();
        open_regular(&owned)?
            .take(MAX_IMAGE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| format!("Cannot read {}: {err}", owned.display()))?;
        if bytes.len() as u64 > MAX_IMAGE_BYTES {
            return Err(format!(
                "{} grew past the {} MiB limit while it was read.",
                owned.display(),
                MAX_IMAGE_BYTES >> 20
            ));
        }
        normalize(bytes).map_err(|why| format!("{} cannot be used: {why}", owned.display()))
    })
    .await;
    let image = match normalized {
        Ok(image) => image,
        Err(message) => return ToolOutcome::failed(ErrorCode::InvalidToolArgs, message),
    };
    let (width, height) = image.original;
    let mut output = format!(
        "{} is an image ({what}, {width}x{height} px); it is attached after the tool results.",
        path.display()
    );
    if image.original != image.size {
        output.push_str(&format!(
            " It was scaled down to {}x{} px ({}, {} bytes) for the model.",
            image.size.0,
            image.size.1,
            image.mime,
            image.data.len()
        ));
    }
    let mut outcome = ToolOutcome::ok(
        output,
        ToolView {
            locations: vec![location(path, 1)],
            ..ToolView::default()
        },
    );
    outcome.attachments.push(dsh_protocol::UserContent::Image {
        mime_type: image.mime.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(image.data),
    });
    outcome
}

/// An image as the model gets it.
#[derive(Debug)]
struct Normalized {
    mime: &'static str,
    data: Vec<u8>,
    /// Its size as sent, in px.
    size: (u32, u32),
    /// The file's size, in px.
    original: (u32, u32),
}

/// Checks an encoded image against the limits, decodes it (bounded) and
/// scales it down to what the model takes, if it must (blocking).
fn normalize(bytes: Vec<u8>) -> Result<Normalized, String> {
    fn reader(bytes: &[u8]) -> Result<ImageReader<Cursor<&[u8]>>, String> {
        ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|err| err.to_string())
    }
    let format = reader(&bytes)?
        .format()
        .ok_or("its format is not recognized")?;
    let mime = match format {
        ImageFormat::Png => "image/png",
        ImageFormat::Jpeg => "image/jpeg",
        ImageFormat::Gif => "image/gif",
        ImageFormat::WebP => "image/webp",
        other => return Err(format!("{other:?} images are not supported")),
    };
    // The header first: the limits are checked before anything is decoded.
    let (width, height) = reader(&bytes)?
        .into_dimensions()
        .map_err(|err| format!("its header is not valid ({err})"))?;
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(format!(
            "it is {width}x{height} px; images may be at most {MAX_IMAGE_SIDE} px a side."
        ));
    }
    if u64::from(width) * u64::from(height) > MAX_IMAGE_PIXELS {
        return Err(format!(
            "it is {width}x{height} px; images may have at most {MAX_IMAGE_PIXELS} pixels."
        ));
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    let mut reader = reader(&bytes)?;
    reader.limits(limits);
    let mut decoder = reader
        .into_decoder()
        .map_err(|err| format!("it cannot be decoded ({err})"))?;
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    // Decoding validates the whole file, even one sent as it is.
    let decoded = DynamicImage::from_decoder(decoder)
        .map_err(|err| format!("it cannot be decoded ({err})"))?;
    let fits = width.max(height) <= TARGET_EDGE && bytes.len() <= TARGET_BYTES;
    if fits && orientation == image::metadata::Orientation::NoTransforms {
        return Ok(Normalized {
            mime,
            data: bytes,
            size: (width, height),
            original: (width, height),
        });
    }
    let original = if turns(orientation) {
        (height, width)
    } else {
        (width, height)
    };
    let scaled = scale_and_orient(decoded, orientation);
    let size = (scaled.width(), scaled.height());
    let (mime, data) = encode(&scaled, format != ImageFormat::Jpeg)?;
    Ok(Normalized {
        mime,
        data,
        size,
        original,
    })
}

/// Whether an orientation swaps width and height.
fn turns(orientation: image::metadata::Orientation) -> bool {
    use image::metadata::Orientation::{Rotate270, Rotate270FlipH, Rotate90, Rotate90FlipH};
    matches!(
        orientation,
        Rotate90 | Rotate270 | Rotate90FlipH | Rotate270FlipH
    )
}

/// The decoded image within [`TARGET_EDGE`], then oriented. Scaled first
/// (area averaging, straight into the small image) and dropped, so the only
/// full-size buffer is the decoded one: orienting it first copied it, and a
/// filtered resize built a float intermediate larger than it.
fn scale_and_orient(
    decoded: DynamicImage,
    orientation: image::metadata::Orientation,
) -> DynamicImage {
    let mut scaled = if decoded.width().max(decoded.height()) > TARGET_EDGE {
        decoded.thumbnail(TARGET_EDGE, TARGET_EDGE)
    } else {
        decoded
    };
    scaled.apply_orientation(orientation);
    scaled
}

/// Encodes a scaled image: PNG when `lossless` is wanted and fits
/// [`TARGET_BYTES`], else the first JPEG quality of [`JPEG_LADDER`] that
/// fits (or the smallest).
fn encode(image: &DynamicImage, lossless: bool) -> Result<(&'static str, Vec<u8>), String> {
    let fail = |err: image::ImageError| format!("it cannot be re-encoded ({err})");
    if lossless {
        let eight_bit = if image.color().has_alpha() {
            DynamicImage::ImageRgba8(image.to_rgba8())
        } else {
            DynamicImage::ImageRgb8(image.to_rgb8())
        };
        let mut png = Cursor::new(Vec::new());
        eight_bit
            .write_to(&mut png, ImageFormat::Png)
            .map_err(fail)?;
        if png.get_ref().len() <= TARGET_BYTES {
            return Ok(("image/png", png.into_inner()));
        }
    }
    let rgb = flatten(image);
    let mut smallest: Option<Vec<u8>> = None;
    for quality in JPEG_LADDER {
        let mut jpeg = Vec::new();
        rgb.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
            &mut jpeg, quality,
        ))
        .map_err(fail)?;
        if jpeg.len() <= TARGET_BYTES {
            return Ok(("image/jpeg", jpeg));
        }
        if smallest.as_ref().is_none_or(|s| jpeg.len() < s.len()) {
            smallest = Some(jpeg);
        }
    }
    Ok(("image/jpeg", smallest.unwrap_or_default()))
}

/// The image as RGB, transparent parts on white.
fn flatten(image: &DynamicImage) -> image::RgbImage {
    if !image.color().has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    image::RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let over = |c: u8| ((u16::from(c) * u16::from(a) + 255 * (255 - u16::from(a))) / 255) as u8;
        image::Rgb([over(r), over(g), over(b)])
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    use super::super::change::peak;
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        });
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn small_images_are_sent_as_they_are_and_large_ones_scaled_down() {
        let small = png(40, 30);
        let sent = normalize(small.clone()).unwrap();
        assert_eq!((sent.mime, sent.size), ("image/png", (40, 30)));
        assert_eq!(sent.data, small);
        let sent = normalize(png(3000, 1000)).unwrap();
        assert_eq!(sent.original, (3000, 1000));
        assert_eq!(sent.size, (2048, 683));
        assert!(sent.data.len() <= TARGET_BYTES);
        let back = image::load_from_memory(&sent.data).unwrap();
        assert_eq!((back.width(), back.height()), (2048, 683));
    }

    #[test]
    fn limits_are_checked_from_the_header() {
        let err = normalize(png(9000, 1)).unwrap_err();
        assert!(err.contains("9000x1 px") && err.contains("8192"), "{err}");
        let err = normalize(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRjunk".to_vec()).unwrap_err();
        assert!(err.contains("not valid"), "{err}");
    }

    #[test]
    fn transparency_is_flattened_on_white_for_jpeg() {
        let clear = DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(
            2,
            2,
            image::Rgba([0, 0, 0, 0]),
        ));
        assert_eq!(flatten(&clear).get_pixel(0, 0).0, [255, 255, 255]);
        let (mime, data) = encode(&clear, false).unwrap();
        assert_eq!(mime, "image/jpeg");
        assert!(image::load_from_memory(&data).is_ok());
    }

    /// Run alone in a child process (its peak is its own): scales and
    /// orients a `DSH_PEAK`² RGB image and reports the peak growth.
    #[cfg(target_os = "linux")]
    #[test]
    #[ignore = "run by scaling_down_costs_less_than_the_decoded_image"]
    fn peak_of_scaling_down() {
        let Ok(side) = std::env::var("DSH_PEAK") else {
            return;
        };
        let side: u32 = side.parse().unwrap();
        let pixels: Vec<u8> = (0..side as usize * side as usize * 3)
            .map(|i| (i % 251) as u8)
            .collect();
        let decoded =
            DynamicImage::ImageRgb8(image::RgbImage::from_raw(side, side, pixels).unwrap());
        let mut size = (0, 0);
        let growth = peak::growth(|| {
            let scaled = scale_and_orient(decoded, image::metadata::Orientation::Rotate90);
            size = (scaled.width(), scaled.height());
        });
        peak::report(growth, &format!("scaled to {size:?}"));
    }

    /// An image with an EXIF rotation is scaled down, then turned: scaling
    /// and turning cost less than the decoded image itself (they cost a
    /// copy of it plus a float intermediate larger than it).
    #[cfg(target_os = "linux")]
    #[test]
    fn scaling_down_costs_less_than_the_decoded_image() {
        let side = 4000u64;
        let (growth, out) = peak::in_child(
            "tools::fs::image::tests::peak_of_scaling_down",
            &side.to_string(),
        );
        assert!(out.contains("scaled to (2048, 2048)"), "{out}");
        let decoded = side * side * 3;
        assert!(
            growth < decoded * 3 / 4,
            "{growth} bytes, decoded {decoded}"
        );
    }
}
