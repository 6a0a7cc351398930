//! TEXMEX vector files (`.fvecs`, `.bvecs`, `.ivecs`): each record is a little-endian int32
//! dimension followed by that many values (f32, u8 or i32). A short or inconsistent file is an
//! error naming the file and the byte offset, never a panic.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::Path;

use super::{DataError, DataPlan, Parts, file_kind};

/// The largest dimension a record may declare before the file is taken for something else.
const MAX_DIMS: i64 = 1 << 16;

/// The element type of a TEXMEX file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    F32,
    U8,
    I32,
}

impl Element {
    fn size(self) -> usize {
        match self {
            Element::U8 => 1,
            Element::F32 | Element::I32 => 4,
        }
    }

    fn of(path: &Path) -> Option<Element> {
        match file_kind(path)? {
            "fvecs" => Some(Element::F32),
            "bvecs" => Some(Element::U8),
            "ivecs" => Some(Element::I32),
            _ => None,
        }
    }
}

/// The vectors of one file, as f32 (u8 values widen exactly).
#[derive(Debug)]
pub struct Records {
    pub dims: usize,
    pub values: Vec<f32>,
    pub count: usize,
}

/// Reads at most `limit` records of a `.fvecs` or `.bvecs` file as f32.
pub fn read_vectors(path: &Path, limit: usize) -> Result<Records, DataError> {
    let element = Element::of(path)
        .filter(|e| *e != Element::I32)
        .ok_or_else(|| DataError::Invalid {
            path: path.to_owned(),
            message: "expected a .fvecs or .bvecs file".into(),
        })?;
    let mut values = Vec::new();
    let (dims, count) = read_records(path, element, limit, |bytes| match element {
        Element::F32 => values.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ),
        _ => values.extend(bytes.iter().map(|b| f32::from(*b))),
    })?;
    Ok(Records {
        dims,
        values,
        count,
    })
}

/// Reads at most `limit` records of an `.ivecs` file (ground-truth ids), one list per record.
pub fn read_ids(path: &Path, limit: usize) -> Result<Vec<Vec<u32>>, DataError> {
    if Element::of(path) != Some(Element::I32) {
        return Err(DataError::Invalid {
            path: path.to_owned(),
            message: "expected an .ivecs file".into(),
        });
    }
    let mut lists = Vec::new();
    let mut negative = None;
    read_records(path, Element::I32, limit, |bytes| {
        let ids: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .map(|id| {
                if id < 0 && negative.is_none() {
                    negative = Some(id);
                }
                id.max(0) as u32
            })
            .collect();
        lists.push(ids);
    })?;
    if let Some(id) = negative {
        return Err(DataError::Invalid {
            path: path.to_owned(),
            message: format!("holds a negative id ({id}); ground truth ids are row numbers"),
        });
    }
    Ok(lists)
}

/// Walks the records, handing each record's value bytes to `each`; returns (dims, records).
fn read_records(
    path: &Path,
    element: Element,
    limit: usize,
    mut each: impl FnMut(&[u8]),
) -> Result<(usize, usize), DataError> {
    let io = |source| DataError::Io {
        path: path.to_owned(),
        source,
    };
    let malformed = |offset: u64, message: String| DataError::Malformed {
        path: path.to_owned(),
        offset,
        message,
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut offset = 0u64;
    let mut dims: Option<usize> = None;
    let mut count = 0;
    let mut record = Vec::new();
    while count < limit {
        let mut header = [0u8; 4];
        match read_full(&mut reader, &mut header).map_err(io)? {
            0 => break,
            4 => {}
            n => {
                return Err(malformed(
                    offset + n as u64,
                    format!("the file ends inside the dimension of record {count}"),
                ));
            }
        }
        let declared = i64::from(i32::from_le_bytes(header));
        if declared <= 0 || declared > MAX_DIMS {
            return Err(malformed(
                offset,
                format!(
                    "record {count} declares dimension {declared}; a TEXMEX file starts each record with its dimension (1..{MAX_DIMS}) as a little-endian int32 — is this really a .{} file?",
                    path.extension().and_then(|e| e.to_str()).unwrap_or("?")
                ),
            ));
        }
        let declared = declared as usize;
        match dims {
            None => dims = Some(declared),
            Some(d) if d != declared => {
                return Err(malformed(
                    offset,
                    format!("record {count} has dimension {declared}, the first record has {d}"),
                ));
            }
            Some(_) => {}
        }
        record.resize(declared * element.size(), 0);
        let got = read_full(&mut reader, &mut record).map_err(io)?;
        if got < record.len() {
            return Err(malformed(
                offset + 4 + got as u64,
                format!(
                    "the file ends inside record {count} ({got} of its {} value bytes)",
                    record.len()
                ),
            ));
        }
        each(&record);
        offset += 4 + record.len() as u64;
        count += 1;
    }
    let dims = dims.ok_or_else(|| malformed(0, "the file holds no record".into()))?;
    Ok((dims, count))
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A TEXMEX base file, its query file and optional ground truth.
pub fn load_base(path: &Path, plan: &DataPlan) -> Result<Parts, DataError> {
    let query_path = plan.query_file.as_deref().ok_or_else(|| {
        DataError::Plan(format!(
            "{} is a TEXMEX base file: name its queries with --query-file (a .fvecs or .bvecs file)",
            path.display()
        ))
    })?;
    let base = read_vectors(path, plan.rows)?;
    let queries = read_vectors(query_path, plan.queries)?;
    if queries.dims != base.dims {
        return Err(DataError::Invalid {
            path: query_path.to_owned(),
            message: format!(
                "queries have {} dimensions, the base vectors in {} have {}",
                queries.dims,
                path.display(),
                base.dims
            ),
        });
    }
    let file_truth = match &plan.truth_file {
        Some(truth) => Some(read_ids(truth, queries.count)?),
        None => None,
    };
    Ok(Parts {
        description: format!(
            "{} ({} × {}, {} queries)",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            common::human::format_thousands(base.count as f64),
            base.dims,
            queries.count
        ),
        dims: base.dims,
        base: base.values,
        queries: queries.values,
        file_truth,
        source_file: Some(path.to_owned()),
        declared_metric: None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes `rows` records of `dims` values through `value`.
    pub fn write_fvecs(path: &Path, rows: usize, dims: usize, value: impl Fn(usize, usize) -> f32) {
        let mut bytes = Vec::new();
        for r in 0..rows {
            bytes.extend_from_slice(&(dims as i32).to_le_bytes());
            for d in 0..dims {
                bytes.extend_from_slice(&value(r, d).to_le_bytes());
            }
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn fvecs_bvecs_and_ivecs_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.fvecs");
        write_fvecs(&f, 3, 4, |r, d| (r * 10 + d) as f32);
        let records = read_vectors(&f, usize::MAX).unwrap();
        assert_eq!((records.dims, records.count), (4, 3));
        assert_eq!(records.values[5], 11.0);
        assert_eq!(read_vectors(&f, 2).unwrap().count, 2);

        let b = dir.path().join("a.bvecs");
        std::fs::write(&b, [2, 0, 0, 0, 7, 255]).unwrap();
        assert_eq!(read_vectors(&b, 9).unwrap().values, vec![7.0, 255.0]);

        let i = dir.path().join("t.ivecs");
        let mut bytes = 2i32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&5i32.to_le_bytes());
        bytes.extend_from_slice(&9i32.to_le_bytes());
        std::fs::write(&i, &bytes).unwrap();
        assert_eq!(read_ids(&i, 9).unwrap(), vec![vec![5, 9]]);
    }

    #[test]
    fn truncated_and_foreign_files_name_the_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cut.fvecs");
        write_fvecs(&f, 2, 4, |_, _| 1.0);
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() - 3]).unwrap();
        let error = read_vectors(&f, usize::MAX).unwrap_err().to_string();
        assert!(error.contains("cut.fvecs: malformed at byte 37"), "{error}");
        assert!(error.contains("ends inside record 1"), "{error}");

        std::fs::write(&f, &bytes[..22]).unwrap();
        let error = read_vectors(&f, usize::MAX).unwrap_err().to_string();
        assert!(error.contains("malformed at byte 22"), "{error}");
        assert!(
            error.contains("ends inside the dimension of record 1"),
            "{error}"
        );

        let text = dir.path().join("words.fvecs");
        std::fs::write(&text, "this is not a vector file\n").unwrap();
        let error = read_vectors(&text, usize::MAX).unwrap_err().to_string();
        assert!(
            error.contains("words.fvecs: malformed at byte 0"),
            "{error}"
        );
        assert!(error.contains("is this really a .fvecs file"), "{error}");

        let empty = dir.path().join("empty.fvecs");
        std::fs::write(&empty, b"").unwrap();
        assert!(
            read_vectors(&empty, 9)
                .unwrap_err()
                .to_string()
                .contains("no record")
        );

        let mixed = dir.path().join("mixed.fvecs");
        let mut bytes = 1i32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&1f32.to_le_bytes());
        bytes.extend_from_slice(&2i32.to_le_bytes());
        std::fs::write(&mixed, &bytes).unwrap();
        let error = read_vectors(&mixed, 9).unwrap_err().to_string();
        assert!(
            error.contains("malformed at byte 8: record 1 has dimension 2"),
            "{error}"
        );
    }
}
